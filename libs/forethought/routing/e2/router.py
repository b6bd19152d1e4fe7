"""Preble's E2 global scheduler (section 4.2, Algorithms 1 and 2), composed from its named parts.

Per request, the prompt is matched against the prefix index and, as Preble's global tree records a GPU
when it assigns a request, against the prompts placed on each worker and not yet finished. Then the
phases decide in order (``exploit_explore``): exploit the longest cached prefix (then rebalance past
Th_bal), else balance prefill and decode, else explore by the load cost ``L + M + P`` and ``W`` (``load_cost``).
A hot prefix whose TTFT doubles on an overloaded holder is replicated (``replication``). Everything
E2 knows about a worker lives in one ``E2WorkerState``.

Parameters: the paper leaves H and Th_bal configurable without values; the defaults follow the
authors' released scheduler (a 3-minute window, Th_bal = 1.5, 45 decode tokens assumed when nothing
better is known). ``rebalance_min_gap_s`` is ours: on an idle cluster the lightest load is 0, so any
exploit would count as imbalanced and a shared prefix would be copied to every worker; a ratio test
needs an absolute floor to mean "imbalanced" (the SGLang router's balance test has the same floor).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from forethought.domain import EngineStats
from forethought.routing.e2.exploit_explore import (
    E2Context,
    Exploit,
    Explore,
    PrefillDecodeBalance,
    Rebalance,
    decode_share,
    prefix_key,
)
from forethought.routing.e2.load_cost import LoadCost
from forethought.routing.e2.replication import HotPrefixReplication
from forethought.routing.e2.worker_state import E2WorkerState
from forethought.routing.ledger import Assignment, LedgerRouter
from forethought.routing.phase_time import PhaseTimeModel, PrebleLinearPhaseTimes
from forethought.routing.phases import Decision, Phase, first_decision
from forethought.routing.router import RoutingRequest

PREBLE_HISTORY_WINDOW_S = 180.0
PREBLE_REBALANCE_THRESHOLD = 1.5
PREBLE_DEFAULT_DECODE_TOKENS = 45
REBALANCE_MIN_GAP_S = 2.0

E2Decision = Decision  # why the last request went where it went; ``costs`` holds the load costs compared


class E2Router(LedgerRouter):
    """E2 exploit/explore placement with load costs, rebalancing and hot-prefix replication."""

    name = "e2"

    def __init__(
        self,
        phase_times: PhaseTimeModel | None = None,
        history_window_s: float = PREBLE_HISTORY_WINDOW_S,
        rebalance_threshold: float = PREBLE_REBALANCE_THRESHOLD,
        decode_ratio_threshold: float = 0.7,
        default_decode_tokens: int = PREBLE_DEFAULT_DECODE_TOKENS,
        capacity_blocks: int | None = None,
        rebalance_min_gap_s: float = REBALANCE_MIN_GAP_S,
    ) -> None:
        super().__init__()
        self.phase_times: PhaseTimeModel = phase_times or PrebleLinearPhaseTimes()
        self.history_window_s = history_window_s
        self.capacity_blocks = capacity_blocks
        self.cost = LoadCost(self.phase_times, history_window_s, default_decode_tokens)
        self.rebalance = Rebalance(rebalance_threshold, rebalance_min_gap_s)
        self.replication = HotPrefixReplication(history_window_s)
        self.phases: tuple[Phase[E2Context], ...] = (
            Exploit(self.rebalance, self.replication), PrefillDecodeBalance(decode_ratio_threshold), Explore()
        )
        self.last_decision: E2Decision | None = None
        # NOTE: added and removed with the ledger's workers, so its order is ``self.workers``' order.
        self._workers: dict[str, E2WorkerState] = {}

    @property
    def rebalance_threshold(self) -> float:
        return self.rebalance.threshold

    @property
    def decision(self) -> str:
        return self.last_decision.phase if self.last_decision is not None else self.name

    # ----- membership -------------------------------------------------------------------------

    def add_worker(self, worker_id: str, now: float) -> None:
        super().add_worker(worker_id, now)
        if worker_id not in self._workers:
            self._workers[worker_id] = E2WorkerState(self.outstanding[worker_id], self.capacity_blocks)

    def remove_worker(self, worker_id: str, now: float) -> None:
        super().remove_worker(worker_id, now)
        self._workers.pop(worker_id, None)
        self.replication.forget_worker(worker_id)

    def observe_load(self, worker_id: str, stats: EngineStats, now: float) -> None:
        super().observe_load(worker_id, stats, now)
        if worker_id in self._workers:
            self._workers[worker_id].reported_kv_blocks = stats.total_kv_blocks

    # ----- Algorithm 1 ------------------------------------------------------------------------

    def choose(self, request: RoutingRequest, now: float) -> str:
        """Places ``request`` matching its prompt against the prefix index and against the prompts of the
        requests already placed and still running: Preble's global tree records a GPU for a node when it
        assigns a request there (section 4.2, "global scheduler scalability"), not when the GPU reports
        the KV cached, so a prefix whose first request is still queued or prefilling is exploited where it
        is about to be cached instead of being explored, and recomputed, elsewhere."""
        return super().choose(self._with_placed_prefixes(request), now)

    def _with_placed_prefixes(self, request: RoutingRequest) -> RoutingRequest:
        cached = dict(request.cached_blocks)
        for worker_id, state in self._workers.items():
            depth = state.placed_depth(request.block_hashes)
            if depth > cached.get(worker_id, 0):
                cached[worker_id] = depth
        return replace(request, cached_blocks=cached)

    def _pick(self, request: RoutingRequest, now: float) -> str:
        self._expire(now)
        cached = {
            w: min(request.prompt_tokens, request.cached_blocks.get(w, 0) * request.block_size)
            for w in self.workers
        }
        context = E2Context(self._workers, self.cost, cached, now)
        self.last_decision = first_decision(self.phases, request, context)
        return self.last_decision.worker_id

    # ----- Algorithm 2 by worker id ------------------------------------------------------------

    def load_cost(self, worker_id: str, request: RoutingRequest, cached_tokens: int, now: float) -> float:
        """``L + M + P + W`` of placing ``request`` on ``worker_id`` (seconds)."""
        return self.cost(self._workers[worker_id], request, cached_tokens, now)

    def window_load(self, worker_id: str) -> float:
        """``L``: prefill time placed on the worker within H plus the decode time of its requests in flight."""
        return self.cost.window_load(self._workers[worker_id])

    def decode_load(self, worker_id: str) -> float:
        """Decode time of the worker's requests in flight, at the time model's iteration for their batch."""
        return self.cost.decode_load(self._workers[worker_id])

    def eviction_cost(self, worker_id: str, needed_blocks: int, now: float, keep: Sequence[int] = ()) -> float:
        """``M``: recomputation of the blocks the worker would evict (LRU) to free ``needed_blocks``."""
        return self.cost.eviction_cost(self._workers[worker_id], needed_blocks, now, keep)

    def memory_wait(self, worker_id: str, request: RoutingRequest) -> float:
        """``W``: the wait for the KV blocks the worker's requests in flight hold and ``request`` lacks."""
        return self.cost.memory_wait(self._workers[worker_id], request)

    def decode_tokens(self) -> float:
        """Decode length to expect: the mean output of the requests finished within H, else the default."""
        return self.cost.decode_tokens()

    def decode_ratio(self, worker_id: str) -> float:
        """Share of the worker's outstanding requests that are decode-only units (prompt cached)."""
        return decode_share(self.outstanding[worker_id])

    def replicas(self, key: int) -> frozenset[str]:
        """Workers currently serving as replicas of the hot prefix ``key``."""
        return frozenset(self.replication.replicas_of(key))

    # ----- bookkeeping ------------------------------------------------------------------------

    def _record(self, request: RoutingRequest, assignment: Assignment, now: float) -> None:
        state = self._workers[assignment.worker_id]
        prefill_s = self.cost.prefill_cost(assignment.missed_tokens)
        state.placed_prefill_s.add(now, prefill_s)
        self.cost.block_size = request.block_size  # M prices evicted blocks at the size placements use
        state.cache.touch(request.block_hashes, now, state.kv_capacity, self.history_window_s)
        exploited = prefix_key(request, assignment.cached_tokens) if assignment.cached_tokens > 0 else None
        state.place(request.request_id, request.block_hashes, exploited, prefill_s)

    def _finished(self, assignment: Assignment, now: float, output_tokens: int | None) -> None:
        self._workers[assignment.worker_id].release(assignment.request_id)
        if output_tokens is not None:
            self.cost.output_lengths.add(now, output_tokens)

    def observe_ttft(self, request_id: str, ttft_s: float, now: float) -> None:
        """Feeds hot-prefix detection (a prefix whose mean TTFT doubled over H is replicated)."""
        assignment = self.assignment(request_id)
        if assignment is None:
            return
        holder = assignment.worker_id
        state = self._workers[holder]
        state.started(request_id)
        key = state.requests[request_id].exploited_prefix
        if key is None:
            return
        samples = state.ttft_samples(key)
        self.replication.record_ttft(samples, ttft_s, now)
        # Replicate only when the holder is "still too high even after rebalancing" (section 4.2).
        loads = {w: self.window_load(w) for w in self.workers}
        if self.rebalance.target(holder, loads) is not None and self.replication.doubled(samples, now):
            self.replication.replicate(key, holder, self.workers, self.window_load, now)
            samples.clear()

    def _expire(self, now: float) -> None:
        for state in self._workers.values():
            state.expire(now, self.history_window_s)
        horizon = now - self.history_window_s
        self.cost.output_lengths.expire(horizon)
        self.replication.expire(horizon)
