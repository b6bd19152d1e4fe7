"""What every router remembers about its own placements: outstanding work per worker, live snapshots.

Preble section 4.2 keeps per-GPU load from the scheduler's own assignment history rather than from a
polled load, because the load a placement matters for is the load ahead, not the load now. Routers
built on ``LedgerRouter`` record each decision in ``choose`` and forget it in ``on_finished``; live
``EngineStats`` snapshots (``observe_load``) are kept beside it for the policies that read them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from forethought.domain import EngineStats
from forethought.routing.router import RoutingRequest


@dataclass(frozen=True)
class Assignment:
    """One placement: where a request went and what it was expected to cost there."""

    request_id: str
    worker_id: str
    assigned_s: float
    prompt_tokens: int
    cached_tokens: int
    predicted_output_tokens: float
    block_size: int

    @property
    def missed_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens


class NoWorkers(LookupError):
    """A router was asked to place a request while no worker is registered."""


class LedgerRouter(ABC):
    """Worker membership, outstanding assignments and live snapshots; subclasses only pick."""

    name = "abstract"

    def __init__(self) -> None:
        self.workers: list[str] = []
        self.outstanding: dict[str, dict[str, Assignment]] = {}
        self.snapshots: dict[str, EngineStats] = {}
        self._by_request: dict[str, Assignment] = {}

    @property
    def decision(self) -> str:
        return self.name

    def add_worker(self, worker_id: str, now: float) -> None:
        if worker_id not in self.outstanding:
            self.workers.append(worker_id)
            self.outstanding[worker_id] = {}

    def remove_worker(self, worker_id: str, now: float) -> None:
        if worker_id in self.outstanding:
            self.workers.remove(worker_id)
            for request_id in self.outstanding.pop(worker_id):
                self._by_request.pop(request_id, None)
            self.snapshots.pop(worker_id, None)

    def choose(self, request: RoutingRequest, now: float) -> str:
        """The worker for ``request``; the decision is recorded as outstanding work there.

        Raises:
            NoWorkers: no worker is registered.
        """
        if not self.workers:
            raise NoWorkers("no worker registered")
        worker_id = self._pick(request, now)
        cached = min(request.prompt_tokens, request.cached_blocks.get(worker_id, 0) * request.block_size)
        assignment = Assignment(
            request.request_id,
            worker_id,
            now,
            request.prompt_tokens,
            cached,
            request.predicted_output_tokens,
            request.block_size,
        )
        self.outstanding[worker_id][request.request_id] = assignment
        self._by_request[request.request_id] = assignment
        self._record(request, assignment, now)
        return worker_id

    def on_finished(self, request_id: str, now: float, output_tokens: int | None = None) -> None:
        """The request left its worker; ``output_tokens`` (when known) feeds decode-length estimates."""
        assignment = self._by_request.pop(request_id, None)
        if assignment is not None:
            self.outstanding[assignment.worker_id].pop(request_id, None)
            self._finished(assignment, now, output_tokens)

    def observe_load(self, worker_id: str, stats: EngineStats, now: float) -> None:
        """A live load snapshot from the worker (ignored for unknown workers)."""
        if worker_id in self.outstanding:
            self.snapshots[worker_id] = stats

    def observe_ttft(self, request_id: str, ttft_s: float, now: float) -> None:  # noqa: B027 - a hook, no-op unless overridden
        """The request's first token arrived ``ttft_s`` after submission (used by E2's replication)."""

    def assignment(self, request_id: str) -> Assignment | None:
        return self._by_request.get(request_id)

    def queue_depth(self, worker_id: str) -> int:
        """Requests on the worker: the larger of our own count and the last snapshot's."""
        own = len(self.outstanding[worker_id])
        stats = self.snapshots.get(worker_id)
        if stats is None:
            return own
        return max(own, stats.rt.running + stats.rt.waiting + stats.be.running + stats.be.waiting)

    def outstanding_tokens(self, worker_id: str) -> float:
        """Uncached prompt plus predicted output tokens of the worker's outstanding requests."""
        return sum(a.missed_tokens + a.predicted_output_tokens for a in self.outstanding[worker_id].values())

    @abstractmethod
    def _pick(self, request: RoutingRequest, now: float) -> str:
        """The policy itself: a worker from ``self.workers``."""

    def _record(self, request: RoutingRequest, assignment: Assignment, now: float) -> None:  # noqa: B027 - a hook
        """Hook: a placement was made (history-keeping policies override)."""

    def _finished(self, assignment: Assignment, now: float, output_tokens: int | None) -> None:  # noqa: B027 - a hook
        """Hook: a placed request left its worker."""
