"""The application simulator's events, one class per event type; each hands itself to the simulation.

The heap holds ``(time_s, priority, sequence, event)``: at one instant, finishes free slots and end steps
before new work lands, and the sequence keeps insertion order, so a replay is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from forethought.demand import BackendSpec

if TYPE_CHECKING:
    from forethought.appsim.simulator import Simulation


@dataclass(frozen=True)
class EngineFinishes:
    """The first running request of an engine is due; stale when the batch changed since (``version``)."""

    priority: ClassVar[int] = 0
    engine: int
    version: int

    def handle(self, sim: Simulation, now_s: float) -> None:
        sim.engine_finishes(self, now_s)


@dataclass(frozen=True)
class StepReady:
    """A run's step has its backend warm and starts its work."""

    priority: ClassVar[int] = 1
    run_id: str
    step: int

    def handle(self, sim: Simulation, now_s: float) -> None:
        sim.step_ready(self, now_s)


@dataclass(frozen=True)
class ToolDone:
    """A run's tool step has run its seconds."""

    priority: ClassVar[int] = 1
    run_id: str

    def handle(self, sim: Simulation, now_s: float) -> None:
        sim.tool_done(self, now_s)


@dataclass(frozen=True)
class PrewarmDue:
    """An Eq. 3 timer set when a run entered ``step``: warm ``backend`` if the run is still there."""

    priority: ClassVar[int] = 2
    run_id: str
    step: int
    backend: BackendSpec

    def handle(self, sim: Simulation, now_s: float) -> None:
        sim.prewarm_due(self, now_s)


@dataclass(frozen=True)
class RunArrives:
    priority: ClassVar[int] = 3
    run_id: str

    def handle(self, sim: Simulation, now_s: float) -> None:
        sim.run_arrives(self, now_s)


Event = EngineFinishes | StepReady | ToolDone | PrewarmDue | RunArrives
