"""What the application simulator replays: runs of applications, each the steps it takes as drawn from
its application file (``forethought.demand.draw_runs``), with an arrival time and optionally a deadline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from forethought.demand import BackendKind, PDGraph, UnitExecution
from forethought.domain import require


@dataclass(frozen=True)
class AppRun:
    """One run of application ``application`` arriving at ``arrival_s``; ``client`` is who submitted it
    (VTC shares service between clients); ``deadline_s`` is absolute, None without one."""

    run_id: str
    application: str
    arrival_s: float
    steps: tuple[UnitExecution, ...]
    client: str = ""
    deadline_s: float | None = None

    def validate(self, graphs: Mapping[str, PDGraph]) -> None:
        """Raises InvalidField when the run names an unknown application or unit, or has no step."""
        require(self.application in graphs, f"runs.{self.run_id}.application", "must name a known application")
        require(len(self.steps) > 0, f"runs.{self.run_id}.steps", "must hold at least one step")
        require(self.arrival_s >= 0, f"runs.{self.run_id}.arrival_s", "must be >= 0")
        graph = graphs[self.application]
        for index, step in enumerate(self.steps):
            graph.unit(step.unit, f"runs.{self.run_id}.steps[{index}].unit")
            step.consumption.validate(f"runs.{self.run_id}.steps[{index}]")


def is_llm(graph: PDGraph, step: UnitExecution) -> bool:
    return graph.units[step.unit].backend.kind is BackendKind.LLM


def with_deadlines(runs: Sequence[AppRun], deadlines_s: Sequence[float | None]) -> list[AppRun]:
    """The runs with the given absolute deadlines, in order."""
    require(len(runs) == len(deadlines_s), "deadlines_s", "must give one deadline per run")
    return [AppRun(r.run_id, r.application, r.arrival_s, r.steps, r.client, d) for r, d in zip(runs, deadlines_s)]
