"""The global scheduler's dispatch state machine (Preble section 4.1-4.2; Hermes and SSJF queue orders).

Requests wait in a ``GlobalQueue`` ordered by the active policy. While workers have room
(``WorkerSlots``), ``take`` hands the next requests out for placement; the shell matches their prompt
blocks against the prefix index (I/O) and ``place`` lets the router (E2 by default) pick the worker.
First tokens and completions free room and feed the router's TTFT and decode-length history.

Failover: a worker lost mid-request is quarantined (out of the router and the slots, ignored by registry
syncs for ``quarantine_s``, long enough for its heartbeat to expire). If no token of the request reached
the client it goes back to the front of the line and is placed elsewhere, up to ``max_attempts``
dispatches; otherwise, or with no worker left, it fails and the caller gets a clean UNAVAILABLE.

Pure: every method takes ``now`` and returns decisions; nothing here does I/O or reads a clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from forethought.domain import ServiceClass
from forethought.queueing.fair_queue import FairQueue
from forethought.queueing.global_queue import GlobalQueue, QueueFull
from forethought.queueing.policy import engine_priority
from forethought.routing.router import Router, RoutingRequest
from forethought.scheduling.request import PlacementStatus, ScheduledRequest
from forethought.scheduling.slots import WorkerSlots, WorkerView

WORKER_LOSS_CODES = frozenset({"UNAVAILABLE", "CANCELLED", "UNKNOWN"})
"""gRPC status names of a worker stream that mean the worker (not the request) failed."""


@dataclass(frozen=True)
class Failover:
    """What happens to a request whose worker was lost: ``retry`` elsewhere, or fail with ``reason``."""

    retry: bool
    reason: str


class Dispatcher:
    """Queue, slots and router of one model's workers.

    Args:
        router: placement policy; its membership follows ``sync_workers``.
        queue: the global wait queue (policy order, or fair between tenants; bounded: ``submit`` raises ``QueueFull``).
        slots: per-worker room.
        max_attempts: dispatches a request may have (the first plus retries after worker losses).
        quarantine_s: how long a lost worker stays out even if the registry still lists it.
        best_effort_limit: waiting requests beyond which best-effort ones are refused (``QueueFull``) while
            real-time ones are still admitted up to the queue's capacity: overload sheds BE first (BROS
            section 3's classes); with a fair queue, only from tenants holding their equal share of the
            limit, so shedding follows fair share too. None: the queue's capacity for both.
    """

    def __init__(self, router: Router, queue: GlobalQueue | FairQueue, slots: WorkerSlots,
                 max_attempts: int = 3, quarantine_s: float = 5.0, best_effort_limit: int | None = None) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        if best_effort_limit is not None and best_effort_limit < 1:
            raise ValueError(f"best_effort_limit must be >= 1, got {best_effort_limit}")
        self.router = router
        self.queue = queue
        self.slots = slots
        self.max_attempts = max_attempts
        self.quarantine_s = quarantine_s
        self.best_effort_limit = best_effort_limit
        self.requests: dict[str, ScheduledRequest] = {}
        self._retries: deque[str] = deque()  # lost before their first token: placed before the queue
        self._placing: dict[str, bool] = {}  # taken, not yet placed: request id -> real-time
        self._quarantined: dict[str, float] = {}  # worker id -> until

    # ----- workers ----------------------------------------------------------------------------

    @property
    def workers(self) -> list[str]:
        return sorted(self.slots.views)

    def sync_workers(self, views: Mapping[str, WorkerView], now: float) -> list[ScheduledRequest]:
        """Adopts the registry's workers and their load; returns waiting requests failed for lack of any.

        With no worker left, every waiting request fails at once (the caller answers UNAVAILABLE)
        rather than waiting for a worker that may never come.
        """
        self._quarantined = {w: until for w, until in self._quarantined.items() if until > now}
        live = {w: view for w, view in views.items() if w not in self._quarantined}
        added, removed = self.slots.sync(live)
        for worker_id in removed:
            self.router.remove_worker(worker_id, now)
        for worker_id in added:
            self.router.add_worker(worker_id, now)
        for worker_id, view in live.items():
            self.router.observe_load(worker_id, view.stats, now)
        return self._orphans(now) if not live else []

    def worker_lost(self, request_id: str, now: float) -> Failover:
        """The request's worker stream broke: quarantine the worker, then retry or fail the request."""
        request = self.requests[request_id]
        lost = request.worker_id
        self._quarantined[lost] = now + self.quarantine_s
        self.slots.remove(lost)
        self.router.remove_worker(lost, now)
        if request.status is PlacementStatus.STREAMING:
            return self._fail(request, now, f"worker {lost} was lost after the first token was sent")
        if request.attempts >= self.max_attempts:
            return self._fail(request, now, f"worker {lost} was lost and {request.attempts} attempts are used up")
        if not self.slots.views:
            return self._fail(request, now, f"worker {lost} was lost and no other worker serves {request.model!r}")
        request.status = PlacementStatus.QUEUED
        request.worker_id = ""
        self._retries.append(request_id)
        return Failover(retry=True, reason=f"worker {lost} was lost before the first token")

    # ----- requests ---------------------------------------------------------------------------

    def submit(self, request: ScheduledRequest, now: float) -> None:
        """Admits a request to the queue.

        Raises:
            QueueFull: the queue is at capacity, or at ``best_effort_limit`` for a best-effort request of a
                tenant holding its share (``retry_after_s`` is the hint for the caller).
            ValueError: a live request already has this id.
        """
        if request.request_id in self.requests:
            raise ValueError(f"request_id {request.request_id!r} is already live")
        limit = self.best_effort_limit
        if (limit is not None and request.queued.service_class is ServiceClass.BE
                and self.queue.at_share(request.queued.tenant, limit)):
            raise QueueFull(limit, self.queue.retry_after_s(now))
        self.queue.push(request.queued, now)
        request.status = PlacementStatus.QUEUED
        self.requests[request.request_id] = request

    def take(self, now: float) -> list[ScheduledRequest]:
        """The next requests to place, in order (retries first), as many as the workers have room for.

        A real-time request needs room for real-time requests only (``WorkerSlots``); the first request
        that finds no room stops the take, so the order holds.
        """
        taken: list[ScheduledRequest] = []
        placing_real_time = sum(self._placing.values())
        budget = self.slots.free() - len(self._placing)
        real_time_budget = self.slots.free(real_time=True) - placing_real_time
        while self._retries or len(self.queue):
            if self._retries:
                request = self.requests[self._retries[0]]
            else:
                head = self.queue.peek(now)
                assert head is not None  # NOTE: the queue is not empty
                request = self.requests[head.request_id]
            real_time = request.queued.service_class is ServiceClass.RT
            if (real_time_budget if real_time else budget) <= 0:
                break
            if self._retries:
                self._retries.popleft()
            else:
                self.queue.pop(now)
            request.status = PlacementStatus.PLACING
            self._placing[request.request_id] = real_time
            taken.append(request)
            budget -= 1
            real_time_budget -= real_time
        return taken

    def place(self, request_id: str, cached_blocks: Mapping[str, int], now: float) -> ScheduledRequest | None:
        """Routes a taken request with its prefix match; None when it was cancelled or failed meanwhile.

        With every worker gone since ``take``, the request goes back to the front of the line.
        """
        real_time = self._placing.pop(request_id, False)
        request = self.requests.get(request_id)
        if request is None or request.status is not PlacementStatus.PLACING:
            return None
        if not self.slots.views:
            request.status = PlacementStatus.QUEUED
            self._retries.appendleft(request_id)
            return None
        queued = request.queued
        worker_id = self.router.choose(RoutingRequest(
            request_id=request_id, prompt_tokens=queued.prompt_tokens, block_hashes=request.block_hashes,
            block_size=request.block_size, predicted_output_tokens=queued.predicted_output_tokens,
            service_class=queued.service_class,
            cached_blocks={w: blocks for w, blocks in cached_blocks.items() if w in self.slots.views},
        ), now)
        request.status = PlacementStatus.DISPATCHED
        request.worker_id = worker_id
        request.engine_priority = engine_priority(self.queue.policy, queued)
        request.attempts += 1
        request.dispatched_s = now
        self.slots.dispatched(worker_id, request_id, real_time)
        return request

    def first_token(self, request_id: str, now: float) -> None:
        """The request's first token reached the client: it runs, and a loss can no longer be hidden."""
        request = self.requests.get(request_id)
        if request is None or request.status is not PlacementStatus.DISPATCHED:
            return
        request.status = PlacementStatus.STREAMING
        request.first_token_s = now
        self.slots.started(request.worker_id, request_id)
        self.router.observe_ttft(request_id, now - request.queued.arrival_s, now)

    def finish(self, request_id: str, now: float, output_tokens: int | None = None) -> None:
        """The request's stream ended on its worker (finished, aborted or failed by the engine)."""
        request = self.requests.pop(request_id, None)
        if request is None:
            return
        request.status = PlacementStatus.FINISHED
        self.slots.released(request.worker_id, request_id)
        self.router.on_finished(request_id, now, output_tokens)

    def cancel(self, request_id: str, now: float) -> ScheduledRequest | None:
        """Withdraws a request; None when unknown. A request on a worker stays live until its stream
        ends (the caller aborts it there); a waiting one is removed and marked CANCELLED."""
        request = self.requests.get(request_id)
        if request is None or request.status.on_worker:
            return request
        if request.status is PlacementStatus.QUEUED:
            if self.queue.remove(request_id) is None:
                self._retries.remove(request_id)
        request.status = PlacementStatus.CANCELLED
        del self.requests[request_id]
        return request

    def revise(self, request_id: str, **changes: Any) -> bool:
        """Changes the queue fields of a request not yet on a worker (its application's rank moved) and
        re-orders it if it waits in the queue; False when it is unknown or already on a worker."""
        request = self.requests.get(request_id)
        if request is None or request.status.on_worker:
            return False
        if request_id in self.queue:
            request.queued = self.queue.revise(request_id, **changes)
        else:  # between placement attempts: the next one sees the new fields
            request.queued = replace(request.queued, **changes)
        return True

    @property
    def waiting(self) -> int:
        """Requests waiting at the scheduler (queue, retries and placements under way)."""
        return len(self.queue) + len(self._retries) + len(self._placing)

    # ----- internals --------------------------------------------------------------------------

    def _fail(self, request: ScheduledRequest, now: float, reason: str) -> Failover:
        request.status = PlacementStatus.FAILED
        self.requests.pop(request.request_id, None)
        self.router.on_finished(request.request_id, now)
        return Failover(retry=False, reason=reason)

    def _orphans(self, now: float) -> list[ScheduledRequest]:
        orphans = [self.requests[request_id] for request_id in self._retries]
        self._retries.clear()
        for queued in self.queue.ordered(now):
            self.queue.remove(queued.request_id)
            orphans.append(self.requests[queued.request_id])
        for request in orphans:
            request.status = PlacementStatus.FAILED
            del self.requests[request.request_id]
        return orphans
