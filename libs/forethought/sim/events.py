"""Simulator events, one class per kind (the Vidur event model; Preble section 5's replay setup).

An event happens at ``time_s``; ``handle(world)`` applies it and returns the events it causes. The heap
orders events by (time, ``order``, sequence): at one instant, finished iterations free capacity first,
then new work arrives, then the global queue dispatches, and engines start their next iteration last,
so an iteration sees everything that arrived at its start time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from forethought.workloads.workload import TraceRequest

if TYPE_CHECKING:
    from forethought.engine.core import StepOutput
    from forethought.sim.cluster import ClusterSimulator


@dataclass(frozen=True)
class Event:
    """Something that happens at ``time_s``."""

    time_s: float
    order: ClassVar[int] = 0

    def handle(self, world: ClusterSimulator) -> Sequence[Event]:
        raise NotImplementedError


@dataclass(frozen=True)
class IterationDone(Event):
    """An engine finished an iteration: its tokens and completions become visible now."""

    engine_id: str
    output: StepOutput
    order: ClassVar[int] = 0

    def handle(self, world: ClusterSimulator) -> Sequence[Event]:
        return world.finish_iteration(self.engine_id, self.output, self.time_s)


@dataclass(frozen=True)
class BatchSubmitted(Event):
    """A closed-loop source submits its next batch (the previous one has completed)."""

    source_index: int
    batch_index: int
    order: ClassVar[int] = 1

    def handle(self, world: ClusterSimulator) -> Sequence[Event]:
        return world.submit_batch(self.source_index, self.batch_index, self.time_s)


@dataclass(frozen=True)
class RequestArrived(Event):
    """A request enters the global queue."""

    request: TraceRequest
    order: ClassVar[int] = 2

    def handle(self, world: ClusterSimulator) -> Sequence[Event]:
        return world.admit(self.request, self.time_s)


@dataclass(frozen=True)
class DispatchDue(Event):
    """The global queue hands waiting requests to engines that have room."""

    order: ClassVar[int] = 3

    def handle(self, world: ClusterSimulator) -> Sequence[Event]:
        return world.dispatch(self.time_s)


@dataclass(frozen=True)
class IterationStarted(Event):
    """An engine schedules and runs one iteration; it ends after the executor's modelled duration."""

    engine_id: str
    order: ClassVar[int] = 4

    def handle(self, world: ClusterSimulator) -> Sequence[Event]:
        return world.start_iteration(self.engine_id, self.time_s)
