"""The application execution plan ``Phi = (E_1, ..., E_m)`` and the stage loop (SamuLLM section 3,
Definition 1; Algorithm 1, lines 2 and 24-25).

Every method (the greedy search and both heuristics) picks one stage at a time from the work left; the
loop estimates it, ends it when its first model finishes, updates the work, and goes on until every model
finished. With preemption, any running model may be stopped or given another plan at a stage boundary;
without it, a model keeps the plan it started with until it finishes (section 5.5's variant), and the
method only places the devices those models leave free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from forethought.planner.plans import ExecutionPlan
from forethought.planner.stage_cost import Assignments, CostModel, StageCosting
from forethought.planner.workload import Workload


@dataclass(frozen=True)
class Stage:
    """One planned execution stage, in seconds of estimated time since the job started."""

    assignments: tuple[tuple[str, ExecutionPlan], ...]
    start_s: float
    duration_s: float
    flops: float
    finished_models: tuple[str, ...]

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass(frozen=True)
class ApplicationPlan:
    """The stages a method chose, the estimated inference time, and the time its search took."""

    method: str
    stages: tuple[Stage, ...]
    search_s: float
    simulations: int

    @property
    def inference_s(self) -> float:
        """The estimated inference time: the sum of the stage durations (Definition 1)."""
        return sum(stage.duration_s for stage in self.stages)

    @property
    def end_to_end_s(self) -> float:
        """Search plus inference, the paper's end-to-end running time (section 5, Metric)."""
        return self.inference_s + self.search_s


StageChooser = Callable[[StageCosting, Mapping[str, ExecutionPlan]], Assignments]
"""Picks the next stage, given the costing of the work left and the plans that must be kept (no preemption)."""


def plan_stages(
    method: str,
    cost: CostModel,
    workload: Workload,
    choose: StageChooser,
    clock: Callable[[], float],
    preemption: bool = True,
    loaded: Mapping[str, ExecutionPlan] | None = None,
) -> ApplicationPlan:
    """Runs ``choose`` stage after stage until ``workload`` is done; ``clock`` times the whole search.
    ``loaded``: the models running with their plans when the search starts (none at a job's start)."""
    started = clock()
    stages: list[Stage] = []
    loaded = dict(loaded or {})
    elapsed, simulations = 0.0, 0
    while not workload.is_done:
        costing = cost.for_stage(workload, loaded)
        kept = {} if preemption else {name: plan for name, plan in loaded.items()
                                      if not workload.is_model_finished(name)}
        assignments = dict(choose(costing, kept))
        if not assignments:
            raise RuntimeError(f"{method}: no stage could be formed from the work left")
        estimate = costing.estimate(assignments)
        finished, generated = costing.cut(assignments, estimate.duration_s)
        simulations += costing.simulations
        after = workload.advance(finished, generated)
        done = tuple(name for name, _ in estimate.assignments if after.is_model_finished(name))
        if not done or not math.isfinite(estimate.duration_s):
            raise RuntimeError(f"{method}: a stage finished no model")
        stages.append(Stage(estimate.assignments, elapsed, estimate.duration_s, estimate.flops, done))
        elapsed += estimate.duration_s
        loaded = {name: plan for name, plan in assignments.items() if name not in done}
        workload = after
    return ApplicationPlan(method, tuple(stages), clock() - started, simulations)
