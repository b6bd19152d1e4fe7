"""llm-d-style weighted scoring: small scorer plugins, a framework that clamps and weights, a max picker.

Each scorer maps every candidate worker to a score in [0, 1] (higher is better). The framework clamps
scores to [0, 1], sums them with their weights, and the picker takes the best total (random among ties,
as llm-d's max-score picker does). Scorers follow llm-d's inference scheduler:

- ``prefix``: the share of the prompt's blocks the worker caches (from the prefix index).
- ``queue``: ``(max - depth) / (max - min)`` over the candidates' queue depths; all equal -> 1.
- ``kv_utilization``: ``1 - kv_cache_usage`` from the worker's last snapshot (1 before any).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from forethought.routing.ledger import LedgerRouter
from forethought.routing.router import RoutingRequest


class Scorer(Protocol):
    """One placement criterion."""

    name: str

    def score(self, request: RoutingRequest, router: LedgerRouter) -> dict[str, float]:
        """Worker -> score in [0, 1] for every worker of ``router``."""


class PrefixScorer:
    name = "prefix"

    def score(self, request: RoutingRequest, router: LedgerRouter) -> dict[str, float]:
        total = len(request.block_hashes)
        return {w: request.cached_blocks.get(w, 0) / total if total else 0.0 for w in router.workers}


class QueueDepthScorer:
    name = "queue"

    def score(self, request: RoutingRequest, router: LedgerRouter) -> dict[str, float]:
        depths = {w: router.queue_depth(w) for w in router.workers}
        high, low = max(depths.values()), min(depths.values())
        if high == low:
            return dict.fromkeys(depths, 1.0)
        return {w: (high - d) / (high - low) for w, d in depths.items()}


class KvUtilizationScorer:
    name = "kv_utilization"

    def score(self, request: RoutingRequest, router: LedgerRouter) -> dict[str, float]:
        return {
            w: 1.0 - (s.kv_cache_usage if (s := router.snapshots.get(w)) else 0.0) for w in router.workers
        }


SCORERS: Mapping[str, type[PrefixScorer] | type[QueueDepthScorer] | type[KvUtilizationScorer]] = {
    PrefixScorer.name: PrefixScorer,
    QueueDepthScorer.name: QueueDepthScorer,
    KvUtilizationScorer.name: KvUtilizationScorer,
}


@dataclass(frozen=True)
class WeightedScorer:
    scorer: Scorer
    weight: float


class WeightedScoringRouter(LedgerRouter):
    """Sum of clamped, weighted scorer outputs; the highest total wins.

    ``last_scores`` keeps the per-scorer scores of the latest decision, for logs and tests.
    """

    name = "weighted"

    def __init__(self, scorers: Sequence[WeightedScorer], seed: int = 0) -> None:
        super().__init__()
        if not scorers:
            raise ValueError("weighted router needs at least one scorer")
        self.scorers = tuple(scorers)
        self._random = random.Random(seed)
        self.last_scores: dict[str, dict[str, float]] = {}

    def totals(self, request: RoutingRequest) -> dict[str, float]:
        totals = dict.fromkeys(self.workers, 0.0)
        self.last_scores = {}
        for weighted in self.scorers:
            scores = weighted.scorer.score(request, self)
            self.last_scores[weighted.scorer.name] = scores
            for worker_id in self.workers:
                totals[worker_id] += weighted.weight * min(1.0, max(0.0, scores.get(worker_id, 0.0)))
        return totals

    def _pick(self, request: RoutingRequest, now: float) -> str:
        totals = self.totals(request)
        best = max(totals.values())
        return self._random.choice([w for w, t in totals.items() if t == best])


def build_weighted_router(weights: Mapping[str, float] | None = None, seed: int = 0) -> WeightedScoringRouter:
    """A weighted router from scorer names and weights (default prefix 3, queue 2, kv_utilization 2)."""
    chosen = dict(weights) if weights is not None else {"prefix": 3.0, "queue": 2.0, "kv_utilization": 2.0}
    unknown = sorted(set(chosen) - set(SCORERS))
    if unknown:
        raise ValueError(f"unknown scorers {unknown}; choose from {', '.join(SCORERS)}")
    return WeightedScoringRouter([WeightedScorer(SCORERS[n](), w) for n, w in chosen.items()], seed=seed)
