"""E2's load cost ``L + M + P`` of placing a request on a worker (Preble section 4.2, Algorithm 2).

- ``L`` (``window_load``): the prefill time of the missed tokens of the requests placed on the worker
  within the history window H (a running sum, as Preble's implementation keeps it), plus the decode
  time of the requests still in flight there: each counts the average decode length of the requests
  finished within H, over all workers, at the time model's decode iteration for the worker's batch as
  it stands (Preble section 2.1, Figure 2: an iteration grows linearly with the context tokens it
  reads). Counting requests alone weighs a 1k-token and a 90k-token context alike; on the Mooncake
  trace that put E2 behind a router balancing KV blocks in use (docs/e2.md).
- ``M`` (``eviction_cost``): the recomputation of the cached tokens the worker would evict, in its own
  LRU order, to fit the request's missed blocks: each radix-tree node ``j`` evicted costs
  ``PREFILLTIME(tokens of j) x N_j``, ``N_j`` the requests that used it there within H.
- ``P`` (``prefill_cost``): the prefill time of the request's own missed tokens.
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
        """``L + M + P`` of placing ``request`` on ``worker`` (seconds of GPU time); ``window_load``: the
        worker's ``L`` when the caller has it already."""
        missed = request.prompt_tokens - cached_tokens
        missed_blocks = -(-missed // request.block_size)
        eviction = self.eviction_cost(worker, missed_blocks, now, keep=request.block_hashes)
        load = self.window_load(worker) if window_load is None else window_load
        return load + eviction + self.prefill_cost(missed)

    def window_load(self, worker: E2WorkerState) -> float:
        """``L``: prefill time placed on the worker within H plus the decode time of its requests in flight."""
        return worker.placed_prefill_s.total + self.decode_load(worker)

    def decode_load(self, worker: E2WorkerState) -> float:
        """Decode time of the worker's requests in flight: each decodes the expected length in
        iterations of the batch they form, at its mean context (prompts plus half the decode)."""
        batch = len(worker.in_flight)
        if not batch:
            return 0.0
        tokens = self.decode_tokens()
        context = sum(a.prompt_tokens for a in worker.in_flight.values()) + batch * tokens / 2
        return batch * tokens * self.phase_times.decode_time(batch, int(context))

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
