"""E2's load cost ``L + M + P`` (and ``W``) of placing a request on a worker (Preble section 4.2, Algorithm 2).

- ``L`` (``window_load``): the prefill time of the missed tokens of the requests placed on the worker
  within the history window H (a running sum, as Preble's implementation keeps it), plus the prefill
  time of those that have not produced their first token yet (the queue a request placed now waits
  behind, which the window sum cannot tell from prefill already done), plus the decode time of the
  requests still in flight there: each counts the average decode length of the requests
  finished within H, over all workers, at the time model's decode iteration for the worker's batch as
  it stands (Preble section 2.1, Figure 2: an iteration grows linearly with the context tokens it
  reads). Counting requests alone weighs a 1k-token and a 90k-token context alike; on the Mooncake
  trace that put E2 behind a router balancing KV blocks in use (docs/e2.md).
- ``M`` (``eviction_cost``): the recomputation of the cached tokens the worker would evict, in its own
  LRU order, to fit the request's missed blocks: each radix-tree node ``j`` evicted costs
  ``PREFILLTIME(tokens of j) x N_j``, ``N_j`` the requests that used it there within H.
- ``P`` (``prefill_cost``): the prefill time of the request's own missed tokens.
- ``W`` (``memory_wait``, beside Algorithm 2's terms): the wait for KV memory held by the requests in
  flight. ``M`` prices evicting cached blocks, which the engine may do at once; blocks a running request
  holds free only when it finishes. When the requests in flight there (their prompt blocks, and their
  decodes at mid-length) and this request's prompt and decode do not fit the worker's KV capacity, the
  request waits until the overflow's share of them has finished, a share of their remaining decode.
  On the Mooncake trace, where an engine holds about eight prompts, this wait decided the tail.
"""

from __future__ import annotations

from collections.abc import Sequence

from forethought.routing.e2.worker_state import E2WorkerState, WindowedSamples
from forethought.routing.phase_time import PhaseTimeModel
from forethought.routing.router import RoutingRequest


class LoadCost:
    """Algorithm 2 over E2's per-worker state, with the cluster-wide inputs it needs: the output lengths
    of the requests finished within H and the size of a KV block."""

    def __init__(self, phase_times: PhaseTimeModel, history_window_s: float, default_decode_tokens: int) -> None:
        self.phase_times = phase_times
        self.history_window_s = history_window_s
        self.default_decode_tokens = default_decode_tokens
        self.output_lengths = WindowedSamples()  # output tokens of requests finished within H, all workers
        self.block_size = 16  # tokens per KV block, taken from the requests placed

    def __call__(
        self, worker: E2WorkerState, request: RoutingRequest, cached_tokens: int, now: float,
        window_load: float | None = None,
    ) -> float:
        """``L + M + P + W`` of placing ``request`` on ``worker`` (seconds); ``window_load``: the worker's
        ``L`` when the caller has it already."""
        missed = request.prompt_tokens - cached_tokens
        missed_blocks = -(-missed // request.block_size)
        eviction = self.eviction_cost(worker, missed_blocks, now, keep=request.block_hashes)
        load = self.window_load(worker) if window_load is None else window_load
        return load + eviction + self.prefill_cost(missed) + self.memory_wait(worker, request)

    def window_load(self, worker: E2WorkerState) -> float:
        """``L``: prefill time placed on the worker within H, plus the prefill still waiting there, plus the
        decode time of its requests in flight."""
        return worker.placed_prefill_s.total + worker.waiting_prefill_total() + self.decode_load(worker)

    def decode_load(self, worker: E2WorkerState) -> float:
        """Decode time of the worker's requests in flight: each decodes the expected length in
        iterations of the batch they form, at its mean context (prompts plus half the decode)."""
        batch = len(worker.in_flight)
        if not batch:
            return 0.0
        tokens = self.decode_tokens()
        context = sum(a.prompt_tokens for a in worker.in_flight.values()) + batch * tokens / 2
        return batch * tokens * self.phase_times.decode_time(batch, int(context))

    def memory_wait(self, worker: E2WorkerState, request: RoutingRequest) -> float:
        """``W``: seconds until the requests in flight on the worker free the KV blocks this request lacks,
        each finishing at an even pace over their remaining decode; 0 when it fits or the capacity is unknown."""
        capacity, batch = worker.kv_capacity, len(worker.in_flight)
        if not capacity or not batch:
            return 0.0
        decode_blocks = self.decode_tokens() / request.block_size
        held = len(worker.placed_blocks) + batch * decode_blocks / 2
        needed = len(request.block_hashes) - worker.placed_depth(request.block_hashes) + decode_blocks
        overflow = held + needed - capacity
        if overflow <= 0:
            return 0.0
        return self.decode_load(worker) / batch * min(1.0, overflow / held)

    def decode_tokens(self) -> float:
        """Decode length to expect: Algorithm 2's "average decoding length in H", else Preble's default."""
        if self.output_lengths:
            return self.output_lengths.mean()
        return float(self.default_decode_tokens)

    def eviction_cost(
        self, worker: E2WorkerState, needed_blocks: int, now: float, keep: Sequence[int] = ()
    ) -> float:
        """``M``: recomputation of the blocks the worker would evict to free ``needed_blocks``; the blocks
        of ``keep`` (the request's own prefix) are pinned by the request and never evicted for it."""
        blocks_to_free = needed_blocks - worker.free_blocks()
        if blocks_to_free <= 0:
            return 0.0
        cost = 0.0
        for blocks, shared_by in worker.cache.evicted_nodes(blocks_to_free, set(keep), now, self.history_window_s):
            if blocks and shared_by:
                cost += self.prefill_cost(blocks * self.block_size) * shared_by
        return cost

    def prefill_cost(self, missed_tokens: int) -> float:
        """``P``: prefill time of ``missed_tokens`` uncached prompt tokens."""
        return self.phase_times.prefill_time(missed_tokens)
