"""Baselines behave as their sources: round-robin, least-load, SGLang cache-aware, Dynamo KV cost, llm-d."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest
from forethought.domain import ClassLoad, EngineStats
from forethought.routing import NoWorkers, RoutingRequest, build_router
from forethought.routing.baselines import KvCostRouter, softmax_sample
from forethought.routing.ledger import LedgerRouter
from forethought.routing.scoring import WeightedScoringRouter

BLOCK = 16


def make_request(rid: str, blocks: int, prefix: int = 0, cached: dict[str, int] | None = None) -> RoutingRequest:
    hashes = tuple(prefix * 1000 + i for i in range(blocks))
    return RoutingRequest(rid, blocks * BLOCK, hashes, BLOCK, predicted_output_tokens=10, cached_blocks=cached or {})


def make_router(name: str, workers: int = 3, **options: object) -> LedgerRouter:
    router = build_router(name, **options)
    assert isinstance(router, LedgerRouter)
    for index in range(workers):
        router.add_worker(f"w{index}", now=0.0)
    return router


def route(router: LedgerRouter, requests: Sequence[RoutingRequest]) -> list[str]:
    return [router.choose(request, now=float(i)) for i, request in enumerate(requests)]


@pytest.mark.parametrize(
    ("name", "options", "requests", "finished", "expected"),
    [
        ("round_robin", {}, [make_request(f"r{i}", 1) for i in range(5)], (), ["w0", "w1", "w2", "w0", "w1"]),
        (
            "least_load",
            {},
            [make_request("a", 1), make_request("b", 1), make_request("c", 1), make_request("d", 1)],
            ("b",),
            ["w0", "w1", "w2", "w1"],
        ),
        (
            "least_load",
            {"by": "tokens"},
            [make_request("a", 10), make_request("b", 1), make_request("c", 2), make_request("d", 1)],
            (),
            ["w0", "w1", "w2", "w1"],
        ),
    ],
    ids=["round-robin-cycles", "least-requests-refills-a-freed-worker", "least-tokens"],
)
def test_load_baselines(
    name: str,
    options: dict[str, object],
    requests: list[RoutingRequest],
    finished: tuple[str, ...],
    expected: list[str],
) -> None:
    router = make_router(name, **options)
    chosen = route(router, requests[:3])
    for request_id in finished:
        router.on_finished(request_id, now=3.0)
    chosen += route(router, requests[3:])
    assert chosen == expected


def test_cache_aware_follows_its_tree_above_the_threshold_and_the_smallest_tree_below() -> None:
    router = make_router("cache_aware", workers=2)
    assert router.choose(make_request("a", 10, prefix=1), now=0.0) == "w0"  # empty trees: first
    assert router.choose(make_request("b", 4, prefix=2), now=1.0) == "w1"  # no match: smallest tree
    assert router.choose(make_request("c", 10, prefix=1), now=2.0) == "w0"  # match rate 1.0 > 0.3
    # 2 of 10 blocks match w1 (rate 0.2 <= 0.3): the smaller tree is w1 (4 blocks vs 10).
    partial = RoutingRequest("d", 160, (2000, 2001, *range(5000, 5008)), BLOCK)
    assert router.choose(partial, now=3.0) == "w1"


def test_cache_aware_falls_back_to_shortest_queue_when_imbalanced() -> None:
    router = make_router("cache_aware", workers=2, balance_abs_threshold=2, balance_rel_threshold=1.5)
    for index in range(3):
        assert router.choose(make_request(f"hot{index}", 10, prefix=1), now=0.0) == "w0"
    # 3 - 0 > 2 and 3 > 1.5 x 0: imbalanced, so the cached prefix no longer attracts the request.
    assert router.choose(make_request("hot3", 10, prefix=1), now=1.0) == "w1"


def test_cache_aware_tree_evicts_least_recent_leaves_first() -> None:
    router = make_router("cache_aware", workers=1, max_tree_size=4)
    router.choose(make_request("a", 3, prefix=1), now=0.0)
    router.choose(make_request("b", 2, prefix=2), now=1.0)
    tree = router.tree
    assert tree.size("w0") == 4
    assert tree.match((1000, 1001, 1002)) == {"w0": 2}  # the leaf 1002 went, the root stayed


@pytest.mark.parametrize(
    ("weight", "expected_costs", "expected"),
    [
        (1.0, {"w0": 1 + (4 + 2), "w1": 4 + 4, "w2": 4 + 4}, "w0"),
        (0.0, {"w0": 4 + 2, "w1": 4, "w2": 4}, "w1"),
    ],
    ids=["overlap-wins", "pure-load-balance"],
)
def test_kv_cost_is_weighted_prefill_blocks_plus_decode_blocks(
    weight: float, expected_costs: dict[str, float], expected: str
) -> None:
    router = make_router("kv_cost", overlap_score_weight=weight, seed=3)
    router.choose(make_request("warm", 2), now=0.0)  # w0 (all equal, seeded tie-break) holds 2 blocks
    assert router.assignment("warm").worker_id == "w0"
    request = make_request("r", 4, prefix=1, cached={"w0": 3})
    assert isinstance(router, KvCostRouter)
    assert router.costs(request) == expected_costs
    if weight == 1.0:
        assert router.choose(request, now=1.0) == expected
    else:
        assert router.choose(request, now=1.0) in {"w1", "w2"}


class RecordingRandom(random.Random):
    def __init__(self) -> None:
        super().__init__(0)
        self.weights: list[float] = []

    def choices(self, population, weights=None, **kwargs):
        self.weights = list(weights)
        return [population[0]]


def test_softmax_sampling_weights_min_max_normalised_costs() -> None:
    rng = RecordingRandom()
    softmax_sample({"a": 10.0, "b": 20.0, "c": 15.0}, temperature=0.5, rng=rng)
    assert rng.weights == pytest.approx([1.0, math.exp(-2.0), math.exp(-1.0)])
    assert softmax_sample({"a": 3.0, "b": 1.0}, temperature=0.0, rng=rng) == "b"


def test_weighted_router_clamps_weights_and_picks_the_best_total() -> None:
    router = make_router("weighted", workers=3)
    assert isinstance(router, WeightedScoringRouter)
    router.observe_load("w0", EngineStats(kv_cache_usage=0.9), now=0.0)
    router.observe_load("w1", EngineStats(kv_cache_usage=0.5, be=ClassLoad(waiting=4)), now=0.0)
    request = make_request("r", 4, cached={"w0": 4, "w1": 2})
    totals = router.totals(request)
    assert router.last_scores == {
        "prefix": {"w0": 1.0, "w1": 0.5, "w2": 0.0},
        "queue": {"w0": 1.0, "w1": 0.0, "w2": 1.0},
        "kv_utilization": {"w0": pytest.approx(0.1), "w1": 0.5, "w2": 1.0},
    }
    assert totals == {"w0": pytest.approx(5.2), "w1": pytest.approx(2.5), "w2": pytest.approx(4.0)}
    assert router.choose(request, now=1.0) == "w0"


def test_registry_rejects_unknown_names_and_options() -> None:
    with pytest.raises(ValueError, match="unknown router 'preble'; choose one of e2, round_robin"):
        build_router("preble")
    with pytest.raises(ValueError, match="bad options for router 'round_robin'"):
        build_router("round_robin", temperature=1.0)
    with pytest.raises(ValueError, match=r"unknown scorers \['gpu'\]"):
        build_router("weighted", weights={"gpu": 1.0})
    with pytest.raises(NoWorkers):
        build_router("least_load").choose(make_request("r", 1), now=0.0)


def test_removed_workers_are_never_chosen_and_their_requests_forgotten() -> None:
    router = make_router("least_load", workers=2)
    router.choose(make_request("a", 1), now=0.0)
    router.remove_worker("w0", now=1.0)
    router.on_finished("a", now=2.0)  # already forgotten: a no-op
    assert route(router, [make_request("b", 1), make_request("c", 1)]) == ["w1", "w1"]
