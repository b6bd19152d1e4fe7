"""What a replay of the application simulator yields: each run's completion, and the prewarm tally."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from forethought.appsim.workload import AppRun


@dataclass(frozen=True)
class RunOutcome:
    """A run and when it finished; its application completion time (ACT) is from its arrival."""

    run: AppRun
    finished_s: float

    @property
    def act_s(self) -> float:
        return self.finished_s - self.run.arrival_s

    @property
    def met_deadline(self) -> bool:
        return self.run.deadline_s is not None and self.finished_s <= self.run.deadline_s + 1e-9


@dataclass
class PrewarmTally:
    """Prewarms started, used by the step they were for, or never used before the run ended; the warm-up
    seconds they took off the critical path (benefit), the seconds prewarmed backends sat ready unused
    (waste), and the warm-up seconds steps still waited for."""

    started: int = 0
    used: int = 0
    unused: int = 0
    benefit_s: float = 0.0
    waste_s: float = 0.0
    cold_wait_s: float = 0.0


@dataclass(frozen=True)
class SimResult:
    """One replay under one order."""

    order: str
    outcomes: tuple[RunOutcome, ...]
    prewarm: PrewarmTally

    @property
    def acts_s(self) -> np.ndarray:
        return np.asarray([outcome.act_s for outcome in self.outcomes])

    @property
    def mean_act_s(self) -> float:
        return float(self.acts_s.mean())

    def act_percentile_s(self, percent: float) -> float:
        return float(np.percentile(self.acts_s, percent))

    @property
    def finished(self) -> int:
        return sum(1 for outcome in self.outcomes if not math.isnan(outcome.finished_s))

    def deadline_attainment(self, runs: set[str] | None = None) -> float:
        """Share of the runs (all, or those named) with a deadline that finished by it."""
        chosen = [o for o in self.outcomes if o.run.deadline_s is not None and (runs is None or o.run.run_id in runs)]
        return sum(o.met_deadline for o in chosen) / len(chosen) if chosen else float("nan")
