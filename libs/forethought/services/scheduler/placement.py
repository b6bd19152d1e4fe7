"""The placement loop: one task that turns the dispatchers' decisions into placements (the I/O half).

Each model has a ``Dispatcher`` (queue, slots, router). Request handlers submit and await a future; the
loop wakes on any change (an arrival, a first token, a completion, a worker list), takes what the
workers have room for, matches all their prompts against the Redis prefix index together (one round
trip for the lot), places them in queue order and resolves the futures with the chosen worker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from prometheus_client import Counter

from forethought.cluster.registry import WorkerRecord
from forethought.queueing import QueueFull
from forethought.rpc.errors import ResourceExhausted, Unavailable
from forethought.scheduling import (
    DependencyHealth,
    Dispatcher,
    Failover,
    ScheduledRequest,
    WorkerView,
)
from forethought.scheduling.slo import slo_outcomes
from forethought.services.scheduler.dependency_reports import record_outcome
from forethought.telemetry.metrics import (
    FAILOVERS,
    PLACED_CACHED_TOKENS,
    PLACED_PROMPT_TOKENS,
    PLACEMENT_DECISION,
    PLACEMENTS,
    QUEUE_DEPTH,
    QUEUE_WAIT,
    SERVICE_CLASS_LABELS,
    SLO_REQUESTS,
)

log = logging.getLogger(__name__)

MatchPrefixes = Callable[[Sequence[Sequence[int]]], Awaitable[list[dict[str, int]]]]
"""Prompts' block hashes -> for each, worker -> leading blocks cached (``RedisPrefixIndex.match_many``)."""


INDEX_RETRY_S = 1.0
"""After the prefix index failed or stalled, placement goes by load alone this long before asking it again,
so a frozen Redis costs one timeout a second, not one per placement."""


class ModelSeries:
    """One model's placement metrics, their label lookups done once (``labels`` takes a lock and builds a
    key on every call, several times per placement)."""

    def __init__(self, model: str) -> None:
        self._model = model
        self.queue_depth = QUEUE_DEPTH.labels("scheduler", model)
        self._prompt_tokens = PLACED_PROMPT_TOKENS.labels(model)
        self._cached_tokens = PLACED_CACHED_TOKENS.labels(model)
        self._queue_wait = {service_class: QUEUE_WAIT.labels(model, label) for service_class, label in SERVICE_CLASS_LABELS.items()}
        self._decision = PLACEMENT_DECISION.labels(model)
        self._placements: dict[tuple[str, str], Counter] = {}  # (worker, router decision) -> its counter

    def forget_worker(self, worker_id: str) -> None:
        """Drops a departed worker's placement counters (a restart without ``--worker-id`` gets a new id)."""
        for worker, decision in [key for key in self._placements if key[0] == worker_id]:
            del self._placements[worker, decision]
            PLACEMENTS.remove(self._model, worker, decision)

    def count(self, placed: ScheduledRequest, decision: str, cached_blocks: int, now: float, decision_s: float) -> None:
        placements = self._placements.get((placed.worker_id, decision))
        if placements is None:
            placements = self._placements[placed.worker_id, decision] = PLACEMENTS.labels(self._model, placed.worker_id,
                                                                                          decision)
        placements.inc()
        self._prompt_tokens.inc(placed.prompt_tokens)
        self._cached_tokens.inc(min(placed.prompt_tokens, cached_blocks * placed.block_size))
        self._queue_wait[placed.generation.service_class].observe(max(0.0, now - placed.queued.arrival_s))
        self._decision.observe(max(0.0, decision_s))


class RequestWithdrawn(Exception):
    """The request was cancelled (by ``Cancel``) while it waited at the scheduler."""


class PlacementLoop:
    """Per-model dispatchers, the futures handlers wait on, and the task that places requests."""

    def __init__(self, build_dispatcher: Callable[[], Dispatcher], match_prefixes: MatchPrefixes,
                 clock: Callable[[], float] = time.time, index_timeout_s: float = 0.25) -> None:
        self._build_dispatcher = build_dispatcher
        self._match_prefixes = match_prefixes
        self._clock = clock
        self._index_timeout_s = index_timeout_s
        self._index_retry_at = 0.0  # before this, placement does not ask the index (it just failed)
        self.dispatchers: dict[str, Dispatcher] = {}
        self._waiters: dict[str, asyncio.Future[str]] = {}
        self._wake = asyncio.Event()
        self._index_health = DependencyHealth("prefix_index", configured=True)
        self._model_series: dict[str, ModelSeries] = {}

    def dispatcher(self, model: str) -> Dispatcher:
        if model not in self.dispatchers:
            self.dispatchers[model] = self._build_dispatcher()
        return self.dispatchers[model]

    def submit(self, request: ScheduledRequest) -> asyncio.Future[str]:
        """Queues the request; the future yields its worker id.

        Raises:
            ResourceExhausted: the model's queue is full (with the queue's retry hint).
        """
        dispatcher = self.dispatcher(request.model)
        try:
            dispatcher.submit(request, self._clock())
        except QueueFull as full:
            raise ResourceExhausted(f"the queue of {request.model!r} is full ({full.capacity} waiting)",
                                    full.retry_after_s) from None
        return self._wait_for(request)

    def sync(self, records: Sequence[WorkerRecord]) -> None:
        """Adopts the registry's serving workers, grouped by model; fails requests left with none."""
        now = self._clock()
        by_model: dict[str, dict[str, WorkerView]] = {model: {} for model in self.dispatchers}
        for record in records:
            if record.state == "serving":
                view = WorkerView(record.worker_id, record.capacity, record.load)
                by_model.setdefault(record.model, {})[record.worker_id] = view
        for model, views in by_model.items():
            for orphan in self.dispatcher(model).sync_workers(views, now):
                self._reject(orphan.request_id, Unavailable(f"no worker serves {model!r} any more; retry later"))
        self.wake()

    def forget_workers(self, worker_ids: Sequence[str]) -> None:
        """The pool gave these workers up: their metric series go."""
        for worker_id in worker_ids:
            for series in self._model_series.values():
                series.forget_worker(worker_id)

    def first_token(self, request: ScheduledRequest) -> None:
        self.dispatcher(request.model).first_token(request.request_id, self._clock())

    def finish(self, request: ScheduledRequest, output_tokens: int | None) -> None:
        now = self._clock()
        if output_tokens is not None:  # completed: its objectives can be judged
            generation = request.generation
            for outcome in slo_outcomes(generation.ttft_slo_s, generation.tpot_slo_s, request.queued.arrival_s,
                                        request.first_token_s, now, output_tokens):
                SLO_REQUESTS.labels(request.model, outcome.objective, "met" if outcome.met else "missed").inc()
        self.dispatcher(request.model).finish(request.request_id, now, output_tokens)
        self.wake()

    def worker_lost(self, request: ScheduledRequest) -> tuple[Failover, asyncio.Future[str] | None]:
        """The request's worker broke; a retry comes with a new future to wait on."""
        decision = self.dispatcher(request.model).worker_lost(request.request_id, self._clock())
        log.warning("request %s: %s%s", request.request_id, decision.reason, "; retrying" if decision.retry else "")
        FAILOVERS.labels(request.model, "retried" if decision.retry else "failed").inc()
        future = self._wait_for(request) if decision.retry else None
        self.wake()
        return decision, future

    def withdraw(self, request: ScheduledRequest) -> ScheduledRequest | None:
        """Cancels a request; returns it while it still runs on a worker (the caller aborts it there)."""
        found = self.dispatcher(request.model).cancel(request.request_id, self._clock())
        if found is not None and found.status.on_worker:
            return found
        self._reject(request.request_id, RequestWithdrawn(request.request_id))
        self.wake()
        return None

    def revise_application(self, request_id: str, rank: float, remaining_s: float) -> bool:
        """A waiting step's run has a new Gittins rank and remaining demand: re-order the step."""
        found = self.find(request_id)
        if found is None or not self.dispatcher(found.model).revise(
                request_id, application_rank=rank, application_remaining_s=remaining_s):
            return False
        self.wake()
        return True

    def find(self, request_id: str) -> ScheduledRequest | None:
        for dispatcher in self.dispatchers.values():
            if request_id in dispatcher.requests:
                return dispatcher.requests[request_id]
        return None

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Places requests until cancelled."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            for model, dispatcher in list(self.dispatchers.items()):
                taken = dispatcher.take(self._clock())
                if taken:
                    await self._place(dispatcher, taken)
                self._series(model).queue_depth.set(dispatcher.waiting)

    async def _place(self, dispatcher: Dispatcher, taken: list[ScheduledRequest]) -> None:
        started = self._clock()
        matches = await self._match([request.block_hashes for request in taken])
        now = self._clock()
        for request, cached in zip(taken, matches, strict=True):
            placed = dispatcher.place(request.request_id, cached, now)
            if placed is None:
                continue
            series = self._series(placed.model)
            series.count(placed, dispatcher.router.decision, cached.get(placed.worker_id, 0), now, self._clock() - started)
            waiter = self._waiters.pop(request.request_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(placed.worker_id)

    def _series(self, model: str) -> ModelSeries:
        series = self._model_series.get(model)
        if series is None:
            series = self._model_series[model] = ModelSeries(model)
        return series

    async def _match(self, prompts: list[tuple[int, ...]]) -> list[dict[str, int]]:
        """The prefix matches; with Redis unreachable or stalled, placement goes on by load alone."""
        if not any(prompts) or self._clock() < self._index_retry_at:
            return [{} for _ in prompts]
        try:
            async with asyncio.timeout(self._index_timeout_s):  # unlike wait_for, no task per match
                cached = await self._match_prefixes(prompts)
        except Exception as error:
            self._index_retry_at = self._clock() + INDEX_RETRY_S
            self._record_index(False, f"{type(error).__name__}: {error}")
            return [{} for _ in prompts]
        self._record_index(True)
        return cached

    def _record_index(self, ok: bool, error: str = "") -> None:
        record_outcome(self._index_health, ok, error, "prefix index unreachable ({error}): degraded, placing by load only",
                       "prefix index reachable again: placement uses cached prefixes")

    def _wait_for(self, request: ScheduledRequest) -> asyncio.Future[str]:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiters[request.request_id] = future
        self.wake()
        return future

    def _reject(self, request_id: str, error: Exception) -> None:
        waiter = self._waiters.pop(request_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
