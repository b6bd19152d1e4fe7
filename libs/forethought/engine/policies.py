"""Iteration-level scheduling policies, built by name (BROS section 4.2, Algorithm 1; baselines of
BROS section 7.1: vLLM's FCFS and iteration round-robin; Preble section 4.3 wait-queue groups).

A policy orders requests and picks the batch; the scheduler commits KV memory. Each policy also ranks
requests in one strict total order (``rank``): when even preemption cannot make room, a request may drop
any running request ranked behind it, lowest first (BROS 5.2's progressive dropping). Being total, the
order always has a first request, which can drop everyone else, so the engine can always make progress.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

from forethought.engine.batch import (
    BatchBuilder,
    SchedulingContext,
    Selection,
    tokens_to_compute,
)
from forethought.engine.batch_size import AdaptiveBatchSize
from forethought.engine.priority_groups import proportional_order
from forethought.engine.request import EngineRequest, EngineRequestStatus

# NOTE: looking up an enum member (``EngineRequestStatus.WAITING``) costs a descriptor call on Python 3.11,
# about ten times a global read; the per-request loops read these aliases instead.
_WAITING, _RUNNING = EngineRequestStatus.WAITING, EngineRequestStatus.RUNNING

Rank = tuple[float, ...]
"""A request's place in a policy's total order; smaller ranks first."""


class SchedulingPolicy(Protocol):
    name: str

    def select(self, ctx: SchedulingContext) -> Selection:
        """The next batch, in the order its KV memory is committed."""

    def rank(self, request: EngineRequest) -> Rank:
        """Who keeps memory: a request may drop running requests of a larger rank. Ranks of two requests
        must differ (the sequence number breaks ties), or equal ranks would block each other for good."""


def _arrival(request: EngineRequest) -> Rank:
    return (request.priority, request.arrival_s, request.sequence)


def _arrival_only(request: EngineRequest) -> Rank:
    """vLLM's ``fcfs`` order: arrival alone, blind to priority and service class."""
    return (request.arrival_s, request.sequence)


def _by_deadline(request: EngineRequest) -> Rank:
    """RT urgency: the next token's deadline, arrival order among equal deadlines (no SLO: +inf)."""
    return (request.deadline_s(), request.arrival_s, request.sequence)


def _tightest_residual(by_deadline: Sequence[EngineRequest], now: float, shortest_s: float) -> float:
    """The smallest remaining time longer than ``shortest_s``, the quickest iteration that could serve it:
    a deadline no batch can meet any more is as lost as a missed one, and must not constrain the batch
    (it would back the batch size off every iteration, starving the other RT requests into the same).
    ``by_deadline`` is in deadline order, so the first remaining time past ``shortest_s`` is the smallest."""
    for request in by_deadline:
        remaining = request.remaining_time_s(now)
        if remaining > shortest_s:
            return remaining
    return float("inf")


ARRIVAL_GUARD_SHARE = 1 / 3
"""Of the RT requests' TTFT objective, what an iteration that adds BE may take: an RT request arriving
during it waits it out, and its own iteration (its prefill, with the RT decodes riding on top) needs the
rest. A half, BROS's ratio of TPOT to TTFT objective, kept 81% of the objectives in the engine under 16 BE
requests in flight, a third 86% for 5% less BE throughput (``forethought bench rt-arrivals``)."""
ARRIVAL_GUARD_WINDOW_S = 60.0
"""How long the TTFT objectives of RT arrivals keep bounding BE iterations after the last one arrived."""
ARRIVAL_GUARD_SAMPLES = 16
"""The guard takes the median objective of this many recent RT arrivals: one late arrival (its objective
used up at the scheduler) does not shrink it."""


class BrosPolicy:
    """Hybrid priority packing: urgent RT first, BE fill/replace by swap cost, adaptive batch size."""

    name = "bros"

    def __init__(self, initial_batch_size: int, max_batch_size: int, priority_groups: int,
                 arrival_guard_share: float = ARRIVAL_GUARD_SHARE) -> None:
        self.batch_size = AdaptiveBatchSize(initial_batch_size, max_batch_size)
        self.priority_groups = priority_groups
        self.arrival_guard_share = arrival_guard_share
        self._rt_objectives: deque[tuple[float, float]] = deque(maxlen=ARRIVAL_GUARD_SAMPLES)  # (arrival, TTFT objective)
        self._selected_at = -math.inf

    def select(self, ctx: SchedulingContext) -> Selection:
        by_deadline = self._rt_order(ctx)
        decodes: list[EngineRequest] = []
        prefills: list[EngineRequest] = []
        for request in by_deadline:
            is_running_decode = (request.status == _RUNNING
                                 and request.num_computed_tokens >= request.num_prompt_tokens)
            (decodes if is_running_decode else prefills).append(request)
        # Running RT decodes ride on top of the adaptive size, which paces what joins them: left out, a
        # decode (0.3 ms of a 13B iteration) only misses its TPOT and tightens the next residual.
        limit = min(self.batch_size.maximum, self.batch_size.current + len(decodes))
        builder = BatchBuilder(ctx, limit)
        rt_order = decodes + prefills
        residual = shortest_s = math.inf  # no finite deadline: no residual, and no arrival with an objective
        if by_deadline and by_deadline[0].deadline_s() != math.inf:
            shortest_s = self._head_time(ctx, rt_order)
            residual = _tightest_residual(by_deadline, ctx.now, shortest_s)
        backed_off = self._add_urgent_rt(builder, decodes, prefills, residual)
        self._add_be(builder, self._be_order(ctx), min(residual, self._arrival_guard(ctx, shortest_s)))
        self.batch_size.update(backed_off)
        return builder.selection()

    def _arrival_guard(self, ctx: SchedulingContext, shortest_s: float) -> float:
        """The longest iteration BE may stretch to while RT requests arrive: ``arrival_guard_share`` of the
        median TTFT objective of the recent arrivals (inf with none in the window). An objective no longer
        than ``shortest_s``, the quickest iteration that could serve the head RT, is already lost (its wait
        at the scheduler used it up) and is not counted, as ``_tightest_residual`` skips it.

        The residual bounds an iteration by the RT requests already queued; one arriving a moment later
        waits the whole iteration out. Unbounded, BE prefills fill the token budget (2,048 tokens are 6 s
        on a 2-core CPU) and an RT arrival misses its objective before it is even selected.
        """
        for request in ctx.waiting:
            if request.is_rt and request.arrival_s > self._selected_at and request.ttft_slo_s > shortest_s:
                self._rt_objectives.append((request.arrival_s, request.ttft_slo_s))
        self._selected_at = ctx.now
        recent = [objective for arrival, objective in self._rt_objectives if arrival >= ctx.now - ARRIVAL_GUARD_WINDOW_S]
        return self.arrival_guard_share * statistics.median(recent) if recent else math.inf

    @staticmethod
    def _head_time(ctx: SchedulingContext, rt_order: Sequence[EngineRequest]) -> float:
        """Estimated time of the batch head's iteration alone (0 with no RT)."""
        alone = BatchBuilder(ctx, 1)
        return alone.estimated_time() if rt_order and alone.try_add(rt_order[0]) else 0.0

    def rank(self, request: EngineRequest) -> Rank:
        """RT before BE; RT by deadline (least remaining time first), BE by (priority, arrival)."""
        return (0.0, *_by_deadline(request)) if request.is_rt else (1.0, *_arrival(request))

    def _rt_order(self, ctx: SchedulingContext) -> list[EngineRequest]:
        """Pending RT sorted by deadline, merged with the waiting RT (Fig. 8's partial sort).

        Waiting requests with one TTFT SLO and no token yet are already in deadline order (arrival
        order), so only the pending queue is sorted and each per-SLO run of the waiting queue is merged as
        it stands; the few dropped after their first token (a TPOT deadline) are sorted on their own. Ranks
        are unique, so Timsort, which finds the sorted runs and merges them in C, gives ``heapq.merge``'s
        order without its per-request generator steps.
        """
        pending = sorted((r for r in ctx.running if r.is_rt), key=_by_deadline)
        runs: dict[float | None, list[EngineRequest]] = {}
        for request in ctx.waiting:
            if request.is_rt:
                slo = request.ttft_slo_s if request.first_token_s is None else None
                runs.setdefault(slo, []).append(request)
        if not runs:
            return pending
        if None in runs:
            runs[None].sort(key=_by_deadline)
        if not pending and len(runs) == 1:
            return next(iter(runs.values()))  # one run: nothing to merge
        return sorted(itertools.chain(pending, *runs.values()), key=_by_deadline)

    def _be_order(self, ctx: SchedulingContext) -> list[EngineRequest]:
        """Fewest checkpointed slots first; waiting BE follow pending ones in Preble's group order."""
        pending = sorted((r for r in ctx.running if not r.is_rt), key=_arrival)
        waiting_be = [r for r in ctx.waiting if not r.is_rt]
        if not waiting_be:
            return sorted(pending, key=ctx.checkpointed_slots)
        waiting = proportional_order(
            waiting_be,
            lambda r: ctx.cached_tokens(r) / r.num_prompt_tokens,
            self.priority_groups,
        )
        waiting.sort(key=lambda r: r.priority)  # stable: group order kept within a priority level
        return sorted(pending, key=ctx.checkpointed_slots) + waiting

    def _add_urgent_rt(
        self,
        builder: BatchBuilder,
        decodes: Sequence[EngineRequest],
        prefills: Sequence[EngineRequest],
        residual: float,
    ) -> bool:
        """Algorithm 1 lines 5-15; True when the batch overran ``residual`` (the backoff signal).

        Running RT decodes go first, each by remaining time, then RT prefills by remaining time take the
        largest chunk that fits what the decodes leave of ``residual``: a prefill chunk ahead of them (1,024
        tokens are about 0.19 s on a 13B model) would push every decode past its TPOT residual.
        """
        for request in decodes:  # one slot each: the BE behind them are dropped first when memory runs out
            builder.try_add(request, may_drop=True)
        if len(builder) > 1 and builder.overruns(residual):
            return True
        for request in prefills:
            if builder.is_full or not builder.tokens_left:
                return False
            added = (self._try_add_within(builder, request, residual, drops_be=True) if builder
                     else builder.try_add(request))
            if not added:
                return False  # the residual or the KV memory is used up
        return False

    def _add_be(self, builder: BatchBuilder, be_order: Sequence[EngineRequest], residual: float) -> None:
        """Algorithm 1 lines 17-33: add BE, or let it replace the least urgent RT that can wait.

        A waiting BE is admitted only while every running BE fitted: starting new BE prompts in memory the
        running ones cannot grow into only strands both (vLLM likewise admits nothing while it preempts).
        """
        starved = False
        for request in be_order:
            if request.status == _WAITING and starved:
                return
            replaced = None
            if builder.is_full:
                replaced = self._replaceable_rt(builder)
                if replaced is None:
                    return
                builder.remove(replaced)
            if self._try_add_within(builder, request, residual):
                continue
            starved = True
            if replaced is not None:
                builder.try_add(replaced)

    @staticmethod
    def _try_add_within(
        builder: BatchBuilder, request: EngineRequest, residual: float, drops_be: bool = False
    ) -> bool:
        """Adds ``request`` with the largest prefill chunk that keeps the batch within ``residual``
        (``drops_be``: see ``BatchBuilder.try_add``; RT prefills ahead of every BE request set it).

        A whole chunked-prefill budget of BE prompt (2,048 tokens, about 0.4 s on a 13B model) rarely
        fits a 0.2 s TPOT residual, so all-or-nothing would shut BE prefills out while RT decodes run.
        """
        if not builder.try_add(request, drops_be=drops_be):
            return False
        if not builder.overruns(residual):
            return True
        fits, overruns = 0, builder.tokens_of(request)
        while overruns - fits > 1:  # the estimate grows with the chunk: bisect on its size
            builder.remove(request)
            middle = (fits + overruns) // 2
            if builder.try_add(request, middle, drops_be=drops_be) and not builder.overruns(residual):
                fits = builder.tokens_of(request)
            else:
                overruns = middle
        builder.remove(request)
        return fits > 0 and builder.try_add(request, fits, drops_be=drops_be)

    @staticmethod
    def _replaceable_rt(builder: BatchBuilder) -> EngineRequest | None:
        """The least urgent RT in the batch, if it still meets its deadline after waiting an iteration."""
        now = builder.ctx.now
        rt = [item.request for item in builder.items if item.request.is_rt]
        if not rt:
            return None
        least_urgent = max(rt, key=_by_deadline)
        if least_urgent.remaining_time_s(now) <= 2 * builder.estimated_time():
            return None
        return least_urgent


class FcfsPolicy:
    """vLLM's ``fcfs`` scheduler (the paper's vLLM baseline): running requests first, then waiting ones,
    by arrival alone. It is blind to service class and priority, so an RT request that arrives after a BE
    batch waits behind it (head-of-line blocking, BROS section 2.2)."""

    name = "fcfs"

    def __init__(self, max_batch_size: int) -> None:
        self.max_batch_size = max_batch_size

    def select(self, ctx: SchedulingContext) -> Selection:
        builder = BatchBuilder(ctx, self.max_batch_size)
        _fill_fcfs(builder, ctx.running, ctx.waiting, _arrival_only)
        return builder.selection()

    def rank(self, request: EngineRequest) -> Rank:
        """vLLM's recompute preemption: the newest running request goes first."""
        return _arrival_only(request)


class PriorityPolicy(FcfsPolicy):
    """vLLM's ``priority`` scheduler: FCFS by (priority, arrival); lower priority values run first."""

    name = "priority"

    def select(self, ctx: SchedulingContext) -> Selection:
        builder = BatchBuilder(ctx, self.max_batch_size)
        _fill_fcfs(builder, ctx.running, ctx.waiting, _arrival)
        return builder.selection()

    def rank(self, request: EngineRequest) -> Rank:
        """vLLM's priority preemption: the lowest priority, newest running request goes first."""
        return _arrival(request)


class RoundRobinPolicy:
    """Iteration-level round-robin over two FCFS queues: RT on even iterations, BE on odd ones."""

    name = "round_robin"

    def __init__(self, max_batch_size: int) -> None:
        self.max_batch_size = max_batch_size

    def select(self, ctx: SchedulingContext) -> Selection:
        rt_turn = ctx.iteration % 2 == 0
        builder = BatchBuilder(ctx, self.max_batch_size)
        for is_rt in (rt_turn, not rt_turn):  # an empty class gives its turn away
            running = [r for r in ctx.running if r.is_rt == is_rt]
            waiting = [r for r in ctx.waiting if r.is_rt == is_rt]
            if any(tokens_to_compute(ctx, r) > 0 for r in (*running, *waiting)):
                _fill_fcfs(builder, running, waiting, _arrival)
                break
        return builder.selection()

    def rank(self, request: EngineRequest) -> Rank:
        """vLLM's recompute preemption: the lowest priority, newest running request goes first."""
        return _arrival(request)


def _fill_fcfs(
    builder: BatchBuilder,
    running: Sequence[EngineRequest],
    waiting: Sequence[EngineRequest],
    order: Callable[[EngineRequest], Rank],
) -> None:
    for request in sorted(running, key=order):
        builder.try_add(request)
    for request in sorted(waiting, key=order):
        if not builder.try_add(request):
            return  # FCFS: a waiting request that does not fit blocks the ones behind it


PolicyFactory = Callable[[int, int, int, float], SchedulingPolicy]
"""(initial batch size, max batch size, priority groups, arrival guard share) -> the policy."""

POLICIES: dict[str, PolicyFactory] = {
    "bros": lambda initial, maximum, groups, guard: BrosPolicy(initial, maximum, groups, guard),
    "fcfs": lambda initial, maximum, groups, guard: FcfsPolicy(maximum),
    "priority": lambda initial, maximum, groups, guard: PriorityPolicy(maximum),
    "round_robin": lambda initial, maximum, groups, guard: RoundRobinPolicy(maximum),
}


def make_policy(
    name: str, initial_batch_size: int, max_batch_size: int, priority_groups: int,
    arrival_guard_share: float = ARRIVAL_GUARD_SHARE,
) -> SchedulingPolicy:
    """Builds the policy registered as ``name``."""
    if name not in POLICIES:
        raise KeyError(f"unknown scheduling policy {name!r}; known: {', '.join(sorted(POLICIES))}")
    return POLICIES[name](initial_batch_size, max_batch_size, priority_groups, arrival_guard_share)
