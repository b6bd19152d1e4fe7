"""Preble's E2 global scheduler (section 4.2, Algorithms 1 and 2).

Per request:
1. Exploit when the longest cached prefix is longer than the missed part: among the workers holding
   that longest prefix (plus replicas of a hot prefix), the lowest load cost wins.
2. Post-assignment rebalancing: if that worker is the heaviest and its load exceeds ``Th_bal`` times
   the lightest worker's (and by more than ``rebalance_min_gap_s``), the request goes to the lightest
   worker instead.
3. Otherwise explore. Prefill/decode balancing first: a worker whose outstanding requests are mostly
   decode-only units (prompt fully cached) takes the new prefill-heavy request; else the lowest load
   cost ``L + M + P`` over all workers wins.

Load cost (Algorithm 2): ``L`` is the prefill time of the missed tokens of the requests placed on the
worker over the history window H, plus the decode time of the requests still on it: the average decode
length in H times the worker's observed time per output token (the authors' released scheduler counts
decode this way: active requests x mean output length x the GPU's measured TPOT; before a worker has
finished a request, the cost model's decode regression). ``M`` is the recomputation time of the
prefixes the worker would evict (LRU) to fit the request, times the requests that hit them in H; ``P``
is the prefill time of the request's own missed tokens. Hot-prefix replication: when the mean TTFT of requests exploiting one prefix on one
worker doubles between the two halves of H, the lightest other worker becomes a replica for H.

Parameters: the paper leaves H and Th_bal configurable without values; the defaults follow the
authors' released scheduler (a 3-minute window, Th_bal = 1.5, 45 decode tokens assumed when nothing
better is known). ``rebalance_min_gap_s`` is ours: on an idle cluster the lightest load is 0, so any
exploit would count as imbalanced and a shared prefix would be copied to every worker; a ratio test
needs an absolute floor to mean "imbalanced" (the SGLang router's balance test has the same floor).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

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


@dataclass
class _PrefixUse:
    """A prefix the router placed on a worker: its new tokens there and when requests hit it."""

    tokens: int
    blocks: int
    hits: deque[float]


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
        self._history: dict[str, deque[tuple[float, float]]] = {}  # (assigned_s, PT)
        self._window_prefill: dict[str, float] = {}
        self._output_lengths: deque[tuple[float, int]] = deque()  # (finished_s, tokens), all workers
        self._per_token_s: dict[str, deque[tuple[float, float]]] = {}  # (finished_s, observed TPOT)
        self._first_token_s: dict[str, float] = {}
        self._prefixes: dict[str, OrderedDict[int, _PrefixUse]] = {}
        self._used_blocks: dict[str, int] = {}  # blocks of the prefixes tracked per worker
        self._exploited: dict[str, int] = {}  # request id -> the prefix it exploited
        self._ttfts: dict[tuple[int, str], deque[tuple[float, float]]] = {}
        self._replicas: dict[int, dict[str, float]] = {}  # prefix -> replica worker -> since

    # ----- membership -------------------------------------------------------------------------

    def add_worker(self, worker_id: str, now: float) -> None:
        super().add_worker(worker_id, now)
        self._history.setdefault(worker_id, deque())
        self._window_prefill.setdefault(worker_id, 0.0)
        self._per_token_s.setdefault(worker_id, deque())
        self._prefixes.setdefault(worker_id, OrderedDict())
        self._used_blocks.setdefault(worker_id, 0)

    def remove_worker(self, worker_id: str, now: float) -> None:
        for request_id in self.outstanding.get(worker_id, {}):
            self._first_token_s.pop(request_id, None)
        super().remove_worker(worker_id, now)
        per_worker_maps = (
            self._history, self._window_prefill, self._per_token_s, self._prefixes, self._used_blocks
        )
        for per_worker in per_worker_maps:
            per_worker.pop(worker_id, None)
        for replicas in self._replicas.values():
            replicas.pop(worker_id, None)

    # ----- Algorithm 1 ------------------------------------------------------------------------

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
        if lightest is not None:
            return E2Decision(lightest, "rebalance", costs)
        return E2Decision(chosen, "exploit", costs)

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
        eviction = self.eviction_cost(worker_id, missed_blocks, now)
        return self.window_load(worker_id) + eviction + self.phase_times.prefill_time(missed)

    def window_load(self, worker_id: str) -> float:
        """``L``: prefill time placed on the worker within H plus the decode time of its requests in flight."""
        return self._window_prefill[worker_id] + self.decode_load(worker_id)

    def decode_load(self, worker_id: str) -> float:
        """Decode time of the worker's outstanding requests at its observed time per output token."""
        tokens = self.decode_tokens()
        observed = self._per_token_s[worker_id]
        if observed:
            per_token = sum(seconds for _, seconds in observed) / len(observed)
            return len(self.outstanding[worker_id]) * tokens * per_token
        return sum(
            tokens * self.phase_times.decode_time(1, int(a.prompt_tokens + tokens / 2))
            for a in self.outstanding[worker_id].values()
        )

    def eviction_cost(self, worker_id: str, needed_blocks: int, now: float) -> float:
        """``M``: recomputation of the LRU prefixes evicted to free ``needed_blocks``, per hitting request."""
        deficit = needed_blocks - self._free_blocks(worker_id)
        cost = 0.0
        for use in self._prefixes[worker_id].values():
            if deficit <= 0:
                break
            cost += self.phase_times.prefill_time(use.tokens) * self._recent_hits(use, now)
            deficit -= use.blocks
        return cost

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
            return sum(tokens for _, tokens in self._output_lengths) / len(self._output_lengths)
        return float(self.default_decode_tokens)

    # ----- bookkeeping ------------------------------------------------------------------------

    def _record(self, request: RoutingRequest, assignment: Assignment, now: float) -> None:
        worker_id = assignment.worker_id
        prefill_s = self.phase_times.prefill_time(assignment.missed_tokens)
        self._history[worker_id].append((now, prefill_s))
        self._window_prefill[worker_id] += prefill_s
        self._track_prefixes(request, assignment, now)

    def _track_prefixes(self, request: RoutingRequest, assignment: Assignment, now: float) -> None:
        prefixes = self._prefixes[assignment.worker_id]
        if assignment.cached_tokens > 0:
            key = self._prefix_key(request, assignment.cached_tokens)
            self._exploited[request.request_id] = key
            if key in prefixes:
                prefixes[key].hits.append(now)
                prefixes.move_to_end(key)
        if assignment.missed_tokens >= request.block_size and request.block_hashes:
            key = request.block_hashes[-1]
            self._forget_prefix(assignment.worker_id, key)
            blocks = -(-assignment.missed_tokens // request.block_size)
            prefixes[key] = _PrefixUse(assignment.missed_tokens, blocks, deque([now]))
            self._used_blocks[assignment.worker_id] += blocks
        self._evict_overflow(assignment.worker_id)

    def _evict_overflow(self, worker_id: str) -> None:
        """The worker evicts LRU prefixes once full (Preble's scheduler mirrors this)."""
        prefixes = self._prefixes[worker_id]
        while prefixes and self._free_blocks(worker_id) < 0:
            self._forget_prefix(worker_id, next(iter(prefixes)))

    def _forget_prefix(self, worker_id: str, key: int) -> None:
        use = self._prefixes[worker_id].pop(key, None)
        if use is not None:
            self._used_blocks[worker_id] -= use.blocks

    def _finished(self, assignment: Assignment, now: float, output_tokens: int | None) -> None:
        self._exploited.pop(assignment.request_id, None)
        first_token_s = self._first_token_s.pop(assignment.request_id, None)
        if output_tokens is None:
            return
        self._output_lengths.append((now, output_tokens))
        if first_token_s is not None and output_tokens > 1 and assignment.worker_id in self._per_token_s:
            self._per_token_s[assignment.worker_id].append((now, (now - first_token_s) / (output_tokens - 1)))

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
        if self._doubled(samples, now):
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
            per_token = self._per_token_s[worker_id]
            while per_token and per_token[0][0] < horizon:
                per_token.popleft()
            prefixes = self._prefixes[worker_id]
            while prefixes and self._recent_hits(next(iter(prefixes.values())), now) == 0:
                self._forget_prefix(worker_id, next(iter(prefixes)))
        while self._output_lengths and self._output_lengths[0][0] < horizon:
            self._output_lengths.popleft()
        for key in [k for k, r in self._replicas.items() if all(t < horizon for t in r.values())]:
            del self._replicas[key]

    def _recent_hits(self, use: _PrefixUse, now: float) -> int:
        while use.hits and use.hits[0] < now - self.history_window_s:
            use.hits.popleft()
        return len(use.hits)

    def _free_blocks(self, worker_id: str) -> float:
        stats = self.snapshots.get(worker_id)
        capacity = self.capacity_blocks or (stats.total_kv_blocks if stats else 0)
        if not capacity:
            return float("inf")
        return capacity - self._used_blocks[worker_id]

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
