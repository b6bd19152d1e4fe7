"""The engine's local scheduler: queues and the phases of one ``schedule()`` (BROS sections 3 and 4.2;
Preble section 4.3).

Requests wait in the waiting queue until first scheduled, then stay in the running ("pending") queue,
holding KV, until they finish; every iteration re-selects from both. One schedule is five phases:

1. ``_context``: a read-only view for the policy (queues, limits, cost and memory estimators);
2. the policy's ``select``: the batch in commit order;
3. ``_admit_prefix_hits``: newly admitted requests take their cached prefix blocks first, so nothing
   committed later in the batch evicts them;
4. ``_commit``: KV memory for each request in order (restoring checkpointed slots, lazily checkpointing
   the BE slots RT overwrites), dropping requests progressively only when nothing else frees memory:
   a request may drop the running requests the policy ranks behind it, lowest rank first;
5. ``_ensure_progress``: when nothing could be committed (the batch's head was blocked by memory that
   requests ranked before it hold, or by prefix blocks later batch members pinned), the request the
   policy ranks first runs alone. It may drop every other request, so an engine with work always
   computes something and the first-ranked request always advances: no deadlock, no livelock.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from forethought.engine.batch import BatchItem, SchedulingContext, Selection, ShapeTally
from forethought.engine.block_manager import BidirectionalBlockManager
from forethought.engine.executor import BatchShape
from forethought.engine.kv_blocks import AllocationResult
from forethought.engine.policies import SchedulingPolicy
from forethought.engine.prefix_cache import PrefixCache
from forethought.engine.request import EngineRequest, EngineRequestStatus

# NOTE: looking up an enum member (``EngineRequestStatus.WAITING``) costs a descriptor call on Python 3.11,
# about ten times a global read; the per-request loops read these aliases instead.
_WAITING = EngineRequestStatus.WAITING


@dataclass(frozen=True)
class SchedulerOutput:
    """The committed batch: what the executor runs and what the memory side did to get there."""

    scheduled: tuple[BatchItem, ...]
    shape: BatchShape
    batch_limit: int
    dropped: tuple[str, ...]
    admitted: tuple[str, ...]
    checkpointed_slots: int
    restored_slots: int
    evicted_hashes: tuple[int, ...]
    prefix_hit_tokens: int


@dataclass
class _CommitLog:
    scheduled: list[BatchItem] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    admitted: list[str] = field(default_factory=list)
    checkpointed: int = 0
    restored: int = 0
    evicted: list[int] = field(default_factory=list)
    hit_tokens: int = 0
    tally: ShapeTally = field(default_factory=ShapeTally)
    """The committed batch's shape, each request counted with the context it holds before the iteration."""


class Scheduler:
    """Waiting and running queues over one block manager, one prefix cache and one policy."""

    def __init__(
        self,
        manager: BidirectionalBlockManager,
        prefix_cache: PrefixCache | None,
        policy: SchedulingPolicy,
        estimate_time: Callable[[BatchShape], float],
        token_budget: int,
        max_batch_size: int,
    ) -> None:
        self.manager = manager
        self.prefix_cache = prefix_cache
        self.policy = policy
        self.estimate_time = estimate_time
        self.token_budget = token_budget
        self.max_batch_size = max_batch_size
        self.waiting: list[EngineRequest] = []
        self.running: list[EngineRequest] = []

    def add(self, request: EngineRequest) -> None:
        bisect.insort(self.waiting, request, key=lambda r: r.sequence)

    def remove(self, request: EngineRequest) -> None:
        """Takes a finished or aborted request out of its queue and frees all its slots."""
        queue = self.running if request in self.running else self.waiting
        if request in queue:
            queue.remove(request)
        self.manager.release(request.request_id)

    def cached_tokens(self, request: EngineRequest) -> int:
        """Prompt tokens a waiting request would reuse; the last prompt token is always recomputed."""
        if self.prefix_cache is None:
            return 0
        limit = (request.num_prompt_tokens - 1) // request.block_size
        return self.prefix_cache.match_length(request.prompt_block_hashes, limit) * request.block_size

    def pinned_slots(self, request: EngineRequest) -> int:
        """Slots of evictable cached blocks a waiting request would take out of the free pool by reading
        its cached prefix: capacity that the request's own admission uses up, so it cannot count it."""
        cache = self.prefix_cache
        if cache is None or request.status != _WAITING or request.num_computed_tokens:
            return 0
        hashes = request.prompt_block_hashes
        matched = cache.match_length(hashes, (request.num_prompt_tokens - 1) // request.block_size)
        return (matched - cache.referenced_length(hashes, matched)) * request.block_size

    def schedule(self, now: float, iteration: int) -> SchedulerOutput:
        selection = self.policy.select(self._context(now, iteration))
        log = _CommitLog()
        log.hit_tokens = self._admit_prefix_hits(selection)
        self._commit(selection, now, log)
        if not log.scheduled:
            self._ensure_progress(selection.batch_limit, now, log)
        shape = log.tally.shape(swap_in_slots=log.restored, swap_out_slots=log.checkpointed)
        return SchedulerOutput(
            scheduled=tuple(log.scheduled),
            shape=shape,
            batch_limit=selection.batch_limit,
            dropped=tuple(log.dropped),
            admitted=tuple(log.admitted),
            checkpointed_slots=log.checkpointed,
            restored_slots=log.restored,
            evicted_hashes=tuple(log.evicted),
            prefix_hit_tokens=log.hit_tokens,
        )

    # ---- phases --------------------------------------------------------------------------------------

    def _context(self, now: float, iteration: int) -> SchedulingContext:
        manager = self.manager
        return SchedulingContext(
            now=now,
            iteration=iteration,
            running=tuple(self.running),
            waiting=tuple(self.waiting),
            max_batch_size=self.max_batch_size,
            token_budget=self.token_budget,
            estimate_time=self.estimate_time,
            free_slots=lambda r: manager.free_capacity(r.request_id, r.service_class) - self.pinned_slots(r),
            rt_slots_dropping_be=lambda r: manager.rt_capacity_dropping_be(r.request_id) - self.pinned_slots(r),
            checkpointed_slots=lambda r: manager.checkpointed_slots(r.request_id),
            cached_tokens=self.cached_tokens,
        )

    def _admit_prefix_hits(self, selection: Selection) -> int:
        hit_tokens = 0
        for item in selection.scheduled:
            request = item.request
            if request.status != _WAITING or request.num_computed_tokens:
                continue
            blocks = self.cached_tokens(request) // request.block_size
            reused = self.manager.acquire_cached(request.request_id, request.prompt_block_hashes[:blocks])
            request.num_computed_tokens = reused
            request.num_hashed_blocks = blocks
            hit_tokens += reused
            if request.first_scheduled_s is None:
                request.num_cached_prompt_tokens = reused
        return hit_tokens

    def _commit(self, selection: Selection, now: float, log: _CommitLog) -> None:
        unpinned: set[str] = set()
        for index, item in enumerate(selection.scheduled):
            request = item.request
            if request.request_id in log.dropped or request.request_id in unpinned:
                continue
            num_tokens = min(item.num_tokens, request.num_tokens - request.num_computed_tokens)
            result = (self.manager.allocate(request.request_id, request.service_class, num_tokens)
                      or self._allocate_dropping(request, num_tokens, log))
            if result is None and self._is_first_ranked(request):
                # Prefix blocks pinned by newcomers later in the batch must not starve the request that
                # outranks everyone: it would drop others every iteration and never run (a livelock).
                unpinned.update(self._unpin(selection.scheduled[index + 1:]))
                result = self._allocate_dropping(request, num_tokens, log)
            if result is None:
                if request.status == EngineRequestStatus.WAITING:
                    self.manager.release(request.request_id)  # gives back its prefix-hit blocks
                    request.reset_for_recompute()
                continue
            if result.checkpointed or result.restored_slots or result.evicted:
                log.checkpointed += sum(result.checkpointed.values())
                log.restored += result.restored_slots
                log.evicted.extend(result.evicted)
            if request.status == _WAITING:
                self._start_running(request, now, log)
            log.scheduled.append(item if num_tokens == item.num_tokens else BatchItem(request, num_tokens))
            log.tally.add(request, num_tokens, request.num_computed_tokens)

    def _is_first_ranked(self, request: EngineRequest) -> bool:
        rank = self.policy.rank
        return rank(request) == min(rank(r) for r in (*self.running, *self.waiting))

    def _unpin(self, items: Sequence[BatchItem]) -> list[str]:
        """Gives back the prefix-hit blocks of the waiting requests among ``items``; returns their ids."""
        unpinned = []
        for item in items:
            request = item.request
            if request.status == EngineRequestStatus.WAITING and request.num_computed_tokens:
                self.manager.release(request.request_id)
                request.reset_for_recompute()
                unpinned.append(request.request_id)
        return unpinned

    def _ensure_progress(self, batch_limit: int, now: float, log: _CommitLog) -> None:
        """Runs the first-ranked request alone; nothing outranks it, so it may drop all the others."""
        queued = (*self.running, *self.waiting)
        if not queued:
            return
        first = min(queued, key=self.policy.rank)
        self._commit_alone(first, batch_limit, now, log)
        if not log.scheduled and first.status == EngineRequestStatus.RUNNING:
            # Stuck even alone: its slots are scattered over part-used shared blocks; it restarts densely.
            self._drop(first)
            self._commit_alone(first, batch_limit, now, log)
            log.dropped.append(first.request_id)

    def _commit_alone(self, request: EngineRequest, batch_limit: int, now: float, log: _CommitLog) -> None:
        selection = Selection((BatchItem(request, self.token_budget),), batch_limit)
        log.hit_tokens += self._admit_prefix_hits(selection)
        self._commit(selection, now, log)

    def _allocate_dropping(
        self, request: EngineRequest, num_tokens: int, log: _CommitLog
    ) -> AllocationResult | None:
        """Allocates after plain allocation failed, dropping progressively (BROS section 5.2) only when
        nothing else frees memory: the running requests the policy ranks behind ``request``, lowest rank
        first, until it fits."""
        allocate = self.manager.allocate
        committed = {item.request.request_id for item in log.scheduled}
        rank = self.policy.rank
        needy_rank = rank(request)
        behind = [r for r in self.running if r.request_id not in committed and rank(r) > needy_rank]
        for victim in sorted(behind, key=rank, reverse=True):
            self._drop(victim)
            log.dropped.append(victim.request_id)
            result = allocate(request.request_id, request.service_class, num_tokens)
            if result is not None:
                return result
        return None

    def _drop(self, victim: EngineRequest) -> None:
        self.running.remove(victim)
        self.manager.release(victim.request_id)
        victim.reset_for_recompute()
        self.add(victim)

    def _start_running(self, request: EngineRequest, now: float, log: _CommitLog) -> None:
        self.waiting.remove(request)
        request.status = EngineRequestStatus.RUNNING
        self.running.append(request)
        log.admitted.append(request.request_id)
        if request.first_scheduled_s is None:
            request.first_scheduled_s = now


def running_by_class(requests: Sequence[EngineRequest]) -> tuple[int, int]:
    """(RT, BE) counts of ``requests``."""
    rt = sum(1 for r in requests if r.is_rt)
    return rt, len(requests) - rt
