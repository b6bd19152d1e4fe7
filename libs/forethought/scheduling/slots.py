"""How many more requests the scheduler may hand each worker (Preble section 4.1, two-level scheduling).

The global scheduler keeps requests until a worker can start them soon: each worker holds at most
``max_waiting_per_worker`` of this scheduler's requests that have not produced a first token yet, and
never more than its registered capacity in flight. Everything else waits in the global queue, where the
order can still change (a better forecast, a new application rank, a more urgent arrival).

Capacity uses the larger of the requests this scheduler has on the worker and the worker's last load
snapshot (which also counts other replicas' requests); the waiting bound counts only this scheduler's
own requests, because a snapshot up to one heartbeat old would hold back dispatch long after the
worker started them.

A real-time request counts only real-time requests against both bounds: the engine preempts best-effort
work for it (BROS section 3), so a worker full of best-effort requests still takes real-time ones, up to
its capacity of them, instead of holding them in the global queue until a best-effort request ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from forethought.domain import EngineStats


@dataclass(frozen=True)
class WorkerView:
    """A worker as the registry reports it: its capacity and last load snapshot."""

    worker_id: str
    capacity: int
    stats: EngineStats = field(default_factory=EngineStats)

    @property
    def reported_in_flight(self) -> int:
        stats = self.stats
        return stats.rt.running + stats.rt.waiting + stats.be.running + stats.be.waiting

    @property
    def reported_real_time_in_flight(self) -> int:
        return self.stats.rt.running + self.stats.rt.waiting


class WorkerSlots:
    """This scheduler's requests on each worker: not yet started, and in flight."""

    def __init__(self, max_waiting_per_worker: int) -> None:
        if max_waiting_per_worker < 1:
            raise ValueError(f"max_waiting_per_worker must be >= 1, got {max_waiting_per_worker}")
        self.max_waiting_per_worker = max_waiting_per_worker
        self.views: dict[str, WorkerView] = {}
        self._unstarted: dict[str, set[str]] = {}
        self._in_flight: dict[str, set[str]] = {}
        self._real_time: set[str] = set()  # request ids of every worker's real-time requests in flight

    def sync(self, views: Mapping[str, WorkerView]) -> tuple[list[str], list[str]]:
        """Adopts the current workers; returns (added ids, removed ids), each sorted."""
        added = sorted(set(views) - set(self.views))
        removed = sorted(set(self.views) - set(views))
        for worker_id in removed:
            self.remove(worker_id)
        for worker_id in added:
            self._unstarted[worker_id] = set()
            self._in_flight[worker_id] = set()
        self.views = {**self.views, **views}
        return added, removed

    def remove(self, worker_id: str) -> None:
        """Forgets a worker and what this scheduler had on it."""
        self.views.pop(worker_id, None)
        self._unstarted.pop(worker_id, None)
        self._real_time -= self._in_flight.pop(worker_id, set())

    def room(self, worker_id: str, real_time: bool = False) -> int:
        """Requests (of real-time ones, with ``real_time``) the worker may still take now (0 for an unknown worker)."""
        view = self.views.get(worker_id)
        if view is None:
            return 0
        unstarted, in_flight = self._unstarted[worker_id], self._in_flight[worker_id]
        if real_time:
            waiting_room = self.max_waiting_per_worker - len(unstarted & self._real_time)
            held = max(len(in_flight & self._real_time), view.reported_real_time_in_flight)
        else:
            waiting_room = self.max_waiting_per_worker - len(unstarted)
            held = max(len(in_flight), view.reported_in_flight)
        return max(0, min(waiting_room, view.capacity - held))

    def free(self, real_time: bool = False) -> int:
        """Requests (of real-time ones, with ``real_time``) all workers together may still take now."""
        return sum(self.room(worker_id, real_time) for worker_id in self.views)

    def unstarted(self, worker_id: str) -> int:
        return len(self._unstarted.get(worker_id, ()))

    def in_flight(self, worker_id: str) -> int:
        return len(self._in_flight.get(worker_id, ()))

    def dispatched(self, worker_id: str, request_id: str, real_time: bool = False) -> None:
        if worker_id in self.views:
            self._unstarted[worker_id].add(request_id)
            self._in_flight[worker_id].add(request_id)
            if real_time:
                self._real_time.add(request_id)

    def started(self, worker_id: str, request_id: str) -> None:
        """The request's first token arrived: it runs in the worker's batch now."""
        self._unstarted.get(worker_id, set()).discard(request_id)

    def released(self, worker_id: str, request_id: str) -> None:
        """The request left the worker (finished, aborted or lost)."""
        self._unstarted.get(worker_id, set()).discard(request_id)
        self._in_flight.get(worker_id, set()).discard(request_id)
        self._real_time.discard(request_id)
