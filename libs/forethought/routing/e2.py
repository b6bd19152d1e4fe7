"""Preble's E2 global scheduler (section 4.2, Algorithms 1 and 2).

Per request (the prompt matched against the prefix index and, as Preble's global tree records a GPU when
it assigns a request, against the prompts placed on each worker and not yet finished):
1. Exploit when the longest cached prefix is longer than the missed part: among the workers holding
   that longest prefix (plus replicas of a hot prefix), the lowest load cost wins.
2. Post-assignment rebalancing: if that worker is the heaviest and its load exceeds ``Th_bal`` times
   the lightest worker's (and by more than ``rebalance_min_gap_s``), the request goes to the lightest
   worker instead, provided the shift narrows the gap: the request's load cost on the light worker
   (recomputation included) must stay below its cost on the heavy one.
3. Otherwise explore. Prefill/decode balancing first: a worker whose outstanding requests are mostly
   decode-only units (prompt fully cached) takes the new prefill-heavy request; else the lowest load
   cost ``L + M + P`` over all workers wins.

Load cost (Algorithm 2): ``L`` is the prefill time of the missed tokens of the requests placed on the
worker over the history window H, plus the decode time of the requests still on it: the average decode
length in H times the worker's observed time per output token (the authors' released scheduler counts
decode this way: active requests x mean output length x the GPU's measured TPOT; before a worker has
finished a request, the cost model's decode regression). ``M`` is the recomputation time of the
cached tokens the worker would evict to fit the request's missed blocks, in its own LRU order (leaf
blocks first, as the engine frees them), each run of blocks shared by the same requests (a radix-tree
node) counted once per request that hit it on that worker within H; ``P`` is the prefill time of the
request's own missed tokens. Hot-prefix replication: when the prefix's worker is still the heaviest
past ``Th_bal`` and the mean TTFT of requests exploiting that prefix there doubles between the two halves
of H, the lightest other worker becomes a replica for H.

Parameters: the paper leaves H and Th_bal configurable without values; the defaults follow the
authors' released scheduler (a 3-minute window, Th_bal = 1.5, 45 decode tokens assumed when nothing
better is known). ``rebalance_min_gap_s`` is ours: on an idle cluster the lightest load is 0, so any
exploit would count as imbalanced and a shared prefix would be copied to every worker; a ratio test
needs an absolute floor to mean "imbalanced" (the SGLang router's balance test has the same floor).
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from forethought.routing.ledger import Assignment, LedgerRouter
from forethought.routing.phase_time import PhaseTimeModel, PrebleLinearPhaseTimes
from forethought.routing.router import RoutingRequest

PREBLE_HISTORY_WINDOW_S = 180.0
PREBLE_REBALANCE_THRESHOLD = 1.5
PREBLE_DEFAULT_DECODE_TOKENS = 45
REBALANCE_MIN_GAP_S = 2.0


@dataclass(frozen=True)
class E2Decision:
    """Why the last request went where it went; ``costs`` holds the load costs compared."""

    worker_id: str
    phase: str  # "exploit", "rebalance", "prefill_decode" or "explore"
    costs: dict[str, float] = field(default_factory=dict)


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
        self.rebalance_threshold = rebalance_threshold
        self.decode_ratio_threshold = decode_ratio_threshold
        self.default_decode_tokens = default_decode_tokens
        self.capacity_blocks = capacity_blocks
        self.rebalance_min_gap_s = rebalance_min_gap_s
        self.last_decision: E2Decision | None = None
        self._block_size = 16  # tokens per KV block, taken from the requests placed
        self._history: dict[str, deque[tuple[float, float]]] = {}  # (assigned_s, PT)
        self._window_prefill: dict[str, float] = {}
        self._output_lengths = WindowedMean()  # output tokens of requests finished within H, all workers
        self._per_token_s: dict[str, WindowedMean] = {}  # observed time per output token within H
        self._first_token_s: dict[str, float] = {}
        # Per worker, the blocks its cache holds by our placements, LRU first, with the times requests used them.
        self._blocks: dict[str, OrderedDict[int, deque[float]]] = {}
        self._exploited: dict[str, int] = {}  # request id -> the prefix it exploited
        self._ttfts: dict[tuple[int, str], deque[tuple[float, float]]] = {}
        self._replicas: dict[int, dict[str, float]] = {}  # prefix -> replica worker -> since
        # Per worker, the prompt blocks of the requests placed there and not finished: cached there by
        # the time a request placed now runs, though no cache event has reported them yet.
        self._placed_blocks: dict[str, Counter[int]] = {}
        self._placed_prompts: dict[str, tuple[int, ...]] = {}  # request id -> its prompt blocks

    # ----- membership -------------------------------------------------------------------------

    def add_worker(self, worker_id: str, now: float) -> None:
        super().add_worker(worker_id, now)
        self._history.setdefault(worker_id, deque())
        self._window_prefill.setdefault(worker_id, 0.0)
        self._per_token_s.setdefault(worker_id, WindowedMean())
        self._blocks.setdefault(worker_id, OrderedDict())
        self._placed_blocks.setdefault(worker_id, Counter())

    def remove_worker(self, worker_id: str, now: float) -> None:
        for request_id in self.outstanding.get(worker_id, {}):
            self._first_token_s.pop(request_id, None)
            self._placed_prompts.pop(request_id, None)
        super().remove_worker(worker_id, now)
        per_worker_maps = (
            self._history, self._window_prefill, self._per_token_s, self._blocks, self._placed_blocks
        )
        for per_worker in per_worker_maps:
            per_worker.pop(worker_id, None)
        for replicas in self._replicas.values():
            replicas.pop(worker_id, None)

    @property
    def decision(self) -> str:
        return self.last_decision.phase if self.last_decision is not None else self.name

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
        for worker_id, placed in self._placed_blocks.items():
            depth = 0
            for block in request.block_hashes:
                if block not in placed:
                    break
                depth += 1
            if depth > cached.get(worker_id, 0):
                cached[worker_id] = depth
        return replace(request, cached_blocks=cached)

    def _pick(self, request: RoutingRequest, now: float) -> str:
        self._expire(now)
        cached = self._cached_tokens(request)
        longest = max(cached.values())
        if longest > request.prompt_tokens - longest:
            self.last_decision = self._exploit(request, cached, longest, now)
        else:
            self.last_decision = self._explore(request, cached, now)
        return self.last_decision.worker_id

    def _exploit(
        self, request: RoutingRequest, cached: dict[str, int], longest: int, now: float
    ) -> E2Decision:
        key = self._prefix_key(request, longest)
        holders = [w for w in self.workers if cached[w] == longest]
        holders += [w for w in self._replicas.get(key, {}) if w not in holders]
        costs = {w: self.load_cost(w, request, cached[w], now) for w in holders}
        chosen = min(holders, key=costs.__getitem__)
        lightest = self._rebalance_target(chosen)
        if lightest is not None and self._shift_narrows_gap(request, chosen, lightest, costs, cached, now):
            return E2Decision(lightest, "rebalance", costs)
        return E2Decision(chosen, "exploit", costs)

    def _shift_narrows_gap(
        self, request: RoutingRequest, heavy: str, light: str, costs: dict[str, float], cached: dict[str, int],
        now: float,
    ) -> bool:
        """Whether sending ``request`` to ``light`` instead of ``heavy`` narrows their gap: section 4.2 shifts
        load "until their difference is below Th_bal", so the light worker, paying the request's
        recomputation (its load cost there), must stay below the heavy one."""
        costs[light] = self.load_cost(light, request, cached[light], now)
        return costs[light] < costs[heavy]

    def _explore(self, request: RoutingRequest, cached: dict[str, int], now: float) -> E2Decision:
        ratios = {w: self.decode_ratio(w) for w in self.workers}
        most_decode = max(self.workers, key=ratios.__getitem__)
        if ratios[most_decode] > self.decode_ratio_threshold:
            return E2Decision(most_decode, "prefill_decode", {})
        costs = {w: self.load_cost(w, request, cached[w], now) for w in self.workers}
        return E2Decision(min(self.workers, key=costs.__getitem__), "explore", costs)

    def _rebalance_target(self, chosen: str) -> str | None:
        """The lightest worker when ``chosen`` is the heaviest and exceeds Th_bal times the lightest
        (and the lightest by ``rebalance_min_gap_s``)."""
        loads = {w: self.window_load(w) for w in self.workers}
        heaviest = max(self.workers, key=loads.__getitem__)
        lightest = min(self.workers, key=loads.__getitem__)
        heavy, light = loads[heaviest], loads[lightest]
        imbalanced = heavy > self.rebalance_threshold * light and heavy - light > self.rebalance_min_gap_s
        if chosen == heaviest and heaviest != lightest and imbalanced:
            return lightest
        return None

    # ----- Algorithm 2 ------------------------------------------------------------------------

    def load_cost(self, worker_id: str, request: RoutingRequest, cached_tokens: int, now: float) -> float:
        """``L + M + P`` of placing ``request`` on ``worker_id`` (seconds of GPU time)."""
        missed = request.prompt_tokens - cached_tokens
        missed_blocks = -(-missed // request.block_size)
        eviction = self.eviction_cost(worker_id, missed_blocks, now, keep=request.block_hashes)
        return self.window_load(worker_id) + eviction + self.phase_times.prefill_time(missed)

    def window_load(self, worker_id: str) -> float:
        """``L``: prefill time placed on the worker within H plus the decode time of its requests in flight."""
        return self._window_prefill[worker_id] + self.decode_load(worker_id)

    def decode_load(self, worker_id: str) -> float:
        """Decode time of the worker's outstanding requests at its observed time per output token."""
        tokens = self.decode_tokens()
        observed = self._per_token_s[worker_id]
        if observed:
            return len(self.outstanding[worker_id]) * tokens * observed.mean()
        return sum(
            tokens * self.phase_times.decode_time(1, int(a.prompt_tokens + tokens / 2))
            for a in self.outstanding[worker_id].values()
        )

    def eviction_cost(
        self, worker_id: str, needed_blocks: int, now: float, keep: Sequence[int] = ()
    ) -> float:
        """``M``: recomputation of the blocks the worker would evict (LRU) to free ``needed_blocks``.

        Consecutive evicted blocks hit by the same requests form one tree node ``j``; it costs
        ``PREFILLTIME(tokens of j) x N_j``, ``N_j`` the requests that used it there within H. Blocks of
        ``keep`` (the request's own prefix) are pinned by the request and never evicted for it.
        """
        deficit = needed_blocks - self._free_blocks(worker_id)
        pinned = set(keep) if deficit > 0 else set()
        cost, run_blocks, run_hits = 0.0, 0, 0
        for block, hits in self._blocks[worker_id].items():
            if deficit <= 0:
                break
            if block in pinned:
                continue
            shared_by = self._recent_hits(hits, now)
            if shared_by != run_hits:
                cost += self._node_cost(run_blocks, run_hits)
                run_blocks, run_hits = 0, shared_by
            run_blocks += 1
            deficit -= 1
        return cost + self._node_cost(run_blocks, run_hits)

    def _node_cost(self, blocks: int, shared_by: int) -> float:
        if blocks == 0 or shared_by == 0:
            return 0.0
        return self.phase_times.prefill_time(blocks * self._block_size) * shared_by

    def decode_ratio(self, worker_id: str) -> float:
        """Share of the worker's outstanding requests that are decode-only units (prompt cached)."""
        outstanding = self.outstanding[worker_id].values()
        if not outstanding:
            return 0.0
        return sum(a.missed_tokens < a.block_size for a in outstanding) / len(outstanding)

    def decode_tokens(self) -> float:
        """Decode length to expect: the mean output of the requests finished within H (Algorithm 2's
        "average decoding length in H", over all workers), else Preble's default."""
        if self._output_lengths:
            return self._output_lengths.mean()
        return float(self.default_decode_tokens)

    # ----- bookkeeping ------------------------------------------------------------------------

    def _record(self, request: RoutingRequest, assignment: Assignment, now: float) -> None:
        worker_id = assignment.worker_id
        prefill_s = self.phase_times.prefill_time(assignment.missed_tokens)
        self._history[worker_id].append((now, prefill_s))
        self._window_prefill[worker_id] += prefill_s
        self._track_blocks(request, assignment, now)
        self._placed_prompts[request.request_id] = request.block_hashes
        self._placed_blocks[worker_id].update(request.block_hashes)

    def _track_blocks(self, request: RoutingRequest, assignment: Assignment, now: float) -> None:
        if assignment.cached_tokens > 0:
            self._exploited[request.request_id] = self._prefix_key(request, assignment.cached_tokens)
        self._block_size = request.block_size
        blocks = self._blocks[assignment.worker_id]
        # Leaf first, so the prompt's root ends most recently used: the engine frees a finished
        # request's blocks tail first, and evicts leaves before the prefixes they extend.
        for block in reversed(request.block_hashes):
            hits = blocks.pop(block, None) or deque()
            hits.append(now)
            blocks[block] = hits
        capacity = self._capacity(assignment.worker_id)
        while capacity and len(blocks) > capacity:
            blocks.popitem(last=False)  # the worker evicts LRU blocks once full

    def _finished(self, assignment: Assignment, now: float, output_tokens: int | None) -> None:
        self._exploited.pop(assignment.request_id, None)
        self._release_placed(assignment)
        first_token_s = self._first_token_s.pop(assignment.request_id, None)
        if output_tokens is None:
            return
        self._output_lengths.add(now, output_tokens)
        if first_token_s is not None and output_tokens > 1 and assignment.worker_id in self._per_token_s:
            self._per_token_s[assignment.worker_id].add(now, (now - first_token_s) / (output_tokens - 1))

    def _release_placed(self, assignment: Assignment) -> None:
        placed = self._placed_blocks.get(assignment.worker_id)
        prompt = self._placed_prompts.pop(assignment.request_id, ())
        if placed is None:
            return
        for block in prompt:
            placed[block] -= 1
            if placed[block] <= 0:
                del placed[block]

    def observe_ttft(self, request_id: str, ttft_s: float, now: float) -> None:
        """Feeds the per-token decode time and hot-prefix detection (a prefix whose mean TTFT doubled
        over H is replicated)."""
        assignment = self.assignment(request_id)
        if assignment is None:
            return
        self._first_token_s[request_id] = now
        key = self._exploited.get(request_id)
        if key is None:
            return
        samples = self._ttfts.setdefault((key, assignment.worker_id), deque())
        samples.append((now, ttft_s))
        while samples[0][0] < now - self.history_window_s:
            samples.popleft()
        # Replicate only when the holder's load is "still too high even after rebalancing" (section 4.2):
        # the holder is the heaviest worker past Th_bal, and the prefix's TTFT doubled over H.
        if self._rebalance_target(assignment.worker_id) is not None and self._doubled(samples, now):
            self._replicate(key, assignment.worker_id, now)
            samples.clear()

    def _doubled(self, samples: deque[tuple[float, float]], now: float) -> bool:
        middle = now - self.history_window_s / 2
        first = [v for t, v in samples if t < middle]
        second = [v for t, v in samples if t >= middle]
        return bool(first and second) and sum(second) / len(second) >= 2 * sum(first) / len(first)

    def _replicate(self, key: int, holder: str, now: float) -> None:
        replicas = self._replicas.setdefault(key, {})
        candidates = [w for w in self.workers if w != holder and w not in replicas]
        if candidates:
            replicas[min(candidates, key=self.window_load)] = now

    def replicas(self, key: int) -> frozenset[str]:
        """Workers currently serving as replicas of the hot prefix ``key``."""
        return frozenset(self._replicas.get(key, {}))

    def _expire(self, now: float) -> None:
        horizon = now - self.history_window_s
        for worker_id, history in self._history.items():
            while history and history[0][0] < horizon:
                self._window_prefill[worker_id] -= history.popleft()[1]
            if not history:
                self._window_prefill[worker_id] = 0.0  # drop accumulated float error
            self._per_token_s[worker_id].expire(horizon)
            # Unused LRU blocks cost nothing to evict; dropping them keeps the mirror small.
            blocks = self._blocks[worker_id]
            while blocks and self._recent_hits(next(iter(blocks.values())), now) == 0:
                blocks.popitem(last=False)
        self._output_lengths.expire(horizon)
        for key in [k for k, r in self._replicas.items() if all(t < horizon for t in r.values())]:
            del self._replicas[key]

    def _recent_hits(self, hits: deque[float], now: float) -> int:
        while hits and hits[0] < now - self.history_window_s:
            hits.popleft()
        return len(hits)

    def _capacity(self, worker_id: str) -> int:
        """KV blocks of the worker: configured, else its last snapshot's; 0 when unknown."""
        stats = self.snapshots.get(worker_id)
        return self.capacity_blocks or (stats.total_kv_blocks if stats else 0)

    def _free_blocks(self, worker_id: str) -> float:
        capacity = self._capacity(worker_id)
        if not capacity:
            return float("inf")
        return capacity - len(self._blocks[worker_id])

    def _cached_tokens(self, request: RoutingRequest) -> dict[str, int]:
        return {
            w: min(request.prompt_tokens, request.cached_blocks.get(w, 0) * request.block_size)
            for w in self.workers
        }

    @staticmethod
    def _prefix_key(request: RoutingRequest, cached_tokens: int) -> int:
        """The chained hash of the last cached block: it names the whole cached prefix."""
        depth = min(len(request.block_hashes), cached_tokens // request.block_size)
        return request.block_hashes[depth - 1] if depth > 0 else 0


class WindowedMean:
    """Mean of the samples added since a moving horizon, kept as a running sum so a read is O(1)."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, float]] = deque()  # (time, value)
        self._total = 0.0

    def __len__(self) -> int:
        return len(self._samples)

    def add(self, now: float, value: float) -> None:
        self._samples.append((now, value))
        self._total += value

    def expire(self, horizon: float) -> None:
        while self._samples and self._samples[0][0] < horizon:
            self._total -= self._samples.popleft()[1]
        if not self._samples:
            self._total = 0.0  # drop accumulated float error

    def mean(self) -> float:
        return self._total / len(self._samples)
