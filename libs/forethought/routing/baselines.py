"""Baseline placement policies, each faithful to its source.

- ``round_robin``: Preble's baseline (section 5.2): requests cycle over data-parallel instances.
- ``least_load``: fewest outstanding requests (or tokens) on the worker.
- ``cache_aware``: the SGLang router's cache-aware policy: shortest queue while load is imbalanced
  (``max - min > balance_abs_threshold`` and ``max > balance_rel_threshold * min``); otherwise the
  best-matching worker of its approximate tree when the match rate exceeds ``cache_threshold``, else
  the worker with the smallest tree. Defaults are the SGLang router's (0.3, 64, 1.5).
- ``kv_cost``: NVIDIA Dynamo's KV router: ``cost = overlap_score_weight * prefill_blocks +
  decode_blocks``; the lowest cost wins at temperature 0, otherwise softmax sampling over costs
  min-max normalised to [0, 1].
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from forethought.routing.approximate_tree import MAX_TREE_BLOCKS, ApproximatePrefixTree
from forethought.routing.ledger import Assignment, LedgerRouter
from forethought.routing.router import RoutingRequest


class RoundRobinRouter(LedgerRouter):
    name = "round_robin"

    def __init__(self) -> None:
        super().__init__()
        self._turn = 0

    def _pick(self, request: RoutingRequest, now: float) -> str:
        worker_id = self.workers[self._turn % len(self.workers)]
        self._turn += 1
        return worker_id


class LeastLoadRouter(LedgerRouter):
    """Fewest outstanding requests (``by="requests"``) or tokens (``by="tokens"``); ties: first added."""

    name = "least_load"

    def __init__(self, by: str = "requests") -> None:
        super().__init__()
        if by not in ("requests", "tokens"):
            raise ValueError(f"least_load by must be 'requests' or 'tokens', got {by!r}")
        self.by = by

    def _pick(self, request: RoutingRequest, now: float) -> str:
        load = self.queue_depth if self.by == "requests" else self.outstanding_tokens
        return min(self.workers, key=load)


class CacheAwareRouter(LedgerRouter):
    """The SGLang router's cache-aware load balancing over an approximate per-worker prefix tree."""

    name = "cache_aware"

    def __init__(
        self,
        cache_threshold: float = 0.3,
        balance_abs_threshold: int = 64,
        balance_rel_threshold: float = 1.5,
        max_tree_size: int = MAX_TREE_BLOCKS,
    ) -> None:
        super().__init__()
        self.cache_threshold = cache_threshold
        self.balance_abs_threshold = balance_abs_threshold
        self.balance_rel_threshold = balance_rel_threshold
        self.tree = ApproximatePrefixTree(max_tree_size)

    def add_worker(self, worker_id: str, now: float) -> None:
        super().add_worker(worker_id, now)
        self.tree.add_worker(worker_id)

    def remove_worker(self, worker_id: str, now: float) -> None:
        super().remove_worker(worker_id, now)
        self.tree.remove_worker(worker_id)

    def is_imbalanced(self) -> bool:
        loads = [len(self.outstanding[w]) for w in self.workers]
        high, low = max(loads), min(loads)
        return high - low > self.balance_abs_threshold and high > self.balance_rel_threshold * low

    def _pick(self, request: RoutingRequest, now: float) -> str:
        if self.is_imbalanced():
            return min(self.workers, key=lambda w: len(self.outstanding[w]))
        depths = self.tree.match(request.block_hashes)
        best = max(self.workers, key=lambda w: depths[w])
        match_rate = depths[best] / len(request.block_hashes) if request.block_hashes else 0.0
        if match_rate > self.cache_threshold:
            return best
        return min(self.workers, key=self.tree.size)

    def _record(self, request: RoutingRequest, assignment: Assignment, now: float) -> None:
        self.tree.insert(assignment.worker_id, request.block_hashes)


class KvCostRouter(LedgerRouter):
    """Dynamo's KV router cost over the prefix index's overlaps and our outstanding blocks."""

    name = "kv_cost"

    def __init__(self, overlap_score_weight: float = 1.0, temperature: float = 0.0, seed: int = 0) -> None:
        super().__init__()
        self.overlap_score_weight = overlap_score_weight
        self.temperature = temperature
        self._random = random.Random(seed)

    def costs(self, request: RoutingRequest) -> dict[str, float]:
        """Worker -> ``overlap_score_weight * prefill_blocks + decode_blocks``."""
        request_blocks = math.ceil(request.prompt_tokens / request.block_size)
        costs = {}
        for worker_id in self.workers:
            overlap = min(request_blocks, request.cached_blocks.get(worker_id, 0))
            decode_blocks = request_blocks + sum(
                math.ceil(a.prompt_tokens / a.block_size) for a in self.outstanding[worker_id].values()
            )
            costs[worker_id] = self.overlap_score_weight * (request_blocks - overlap) + decode_blocks
        return costs

    def _pick(self, request: RoutingRequest, now: float) -> str:
        return softmax_sample(self.costs(request), self.temperature, self._random)


def softmax_sample(costs: dict[str, float], temperature: float, rng: random.Random) -> str:
    """Lowest cost at temperature 0 (random among ties); else sample ``exp(-normalised / T)``."""
    low, high = min(costs.values()), max(costs.values())
    if temperature <= 0 or high == low:
        return rng.choice([w for w, c in costs.items() if c == low])
    workers: Sequence[str] = list(costs)
    weights = [math.exp(-(costs[w] - low) / (high - low) / temperature) for w in workers]
    return rng.choices(workers, weights=weights)[0]
