"""E2's parts on their own (Preble section 4.2): prefix affinity, rebalancing, prefill/decode share, the
cache mirror's eviction order, windowed samples, hot-prefix replication, and per-worker state."""

from __future__ import annotations

from collections import deque

import pytest
from forethought.routing import Assignment, E2Router, RoutingRequest
from forethought.routing.e2.exploit_explore import (
    Rebalance,
    decode_share,
    prefers_exploit,
    prefix_holders,
    prefix_key,
)
from forethought.routing.e2.replication import HotPrefixReplication
from forethought.routing.e2.worker_state import CacheMirror, E2WorkerState, WindowedSamples

BLOCK = 16


@pytest.mark.parametrize(
    ("cached", "prompt", "exploit"),
    [(65, 128, True), (64, 128, False), (0, 10, False), (10, 10, True)],
    ids=["cached-longer", "equal-halves", "nothing-cached", "all-cached"],
)
def test_prefix_affinity_exploits_when_the_cached_part_exceeds_the_missed_part(
    cached: int, prompt: int, exploit: bool
) -> None:
    assert prefers_exploit(cached, prompt) is exploit


@pytest.mark.parametrize(
    ("cached_tokens", "key"), [(48, 13), (40, 12), (15, 0), (1000, 14)], ids=["3-blocks", "partial", "none", "past-end"]
)
def test_the_prefix_key_is_the_hash_of_the_last_whole_cached_block(cached_tokens: int, key: int) -> None:
    request = RoutingRequest("r", 4 * BLOCK, (11, 12, 13, 14), BLOCK)
    assert prefix_key(request, cached_tokens) == key


def test_prefix_holders_are_the_longest_holders_then_new_replicas() -> None:
    cached = {"w0": 32, "w1": 16, "w2": 32, "w3": 0}
    assert prefix_holders(cached, 32, replicas=["w2", "w3", "w1"]) == ["w0", "w2", "w3", "w1"]


@pytest.mark.parametrize(
    ("chosen", "loads", "target"),
    [
        ("w0", {"w0": 3.0, "w1": 1.0, "w2": 2.5}, "w1"),
        ("w2", {"w0": 3.0, "w1": 1.0, "w2": 2.5}, None),  # not the heaviest
        ("w0", {"w0": 1.4, "w1": 1.0}, None),  # below Th_bal = 1.5
        ("w0", {"w0": 0.4, "w1": 0.0}, None),  # past Th_bal but within the 0.5 s gap
        ("w0", {"w0": 9.0}, None),  # one worker
    ],
    ids=["heaviest-past-th-bal", "not-heaviest", "below-ratio", "below-gap", "alone"],
)
def test_rebalance_targets_the_lightest_worker_only_past_th_bal_and_the_gap(
    chosen: str, loads: dict[str, float], target: str | None
) -> None:
    assert Rebalance(threshold=1.5, min_gap_s=0.5).target(chosen, loads) == target


def test_the_decode_share_counts_requests_missing_less_than_a_block() -> None:
    def assignment(rid: str, cached: int) -> Assignment:
        return Assignment(rid, "w0", 0.0, 64, cached, 0.0, BLOCK)

    assert decode_share({}) == 0.0
    in_flight = {"a": assignment("a", 64), "b": assignment("b", 50), "c": assignment("c", 48), "d": assignment("d", 0)}
    assert decode_share(in_flight) == 0.5  # a (0 missed) and b (14 missed) are decode-only


def test_the_cache_mirror_evicts_leaves_first_in_nodes_of_equal_sharing() -> None:
    mirror = CacheMirror()
    mirror.touch((1, 2, 3, 4), now=0.0, capacity=0, window_s=10.0)
    mirror.touch((1, 2, 7), now=1.0, capacity=0, window_s=10.0)
    # LRU first: 4, 3 (one use each), then 7 (one use), 2, 1 (two uses each).
    assert list(mirror.evicted_nodes(5, pinned=set(), now=2.0, window_s=10.0)) == [(0, 0), (3, 1), (2, 2)]
    assert list(mirror.evicted_nodes(5, pinned={3}, now=2.0, window_s=10.0)) == [(0, 0), (2, 1), (2, 2)]
    mirror.touch((8, 9), now=2.0, capacity=5, window_s=10.0)  # past capacity: 4 and 3 go
    assert list(mirror.evicted_nodes(1, pinned=set(), now=2.0, window_s=10.0)) == [(0, 0), (1, 1)]
    assert len(mirror) == 5
    mirror.drop_unused(now=11.5, window_s=10.0)  # 7, 2 and 1 were last used at 1.0
    assert len(mirror) == 2


def test_a_block_every_prompt_shares_keeps_only_its_uses_within_the_window() -> None:
    mirror = CacheMirror()
    for step in range(1_000):  # one use a second; the shared block stays most recently used
        mirror.touch((1, 1_000 + step), now=float(step), capacity=0, window_s=10.0)
    shared = mirror._blocks[1]
    assert len(shared) == 11 and shared[0] == 989.0


def test_a_worker_forgets_the_ttfts_of_prefixes_not_exploited_within_the_window() -> None:
    state = E2WorkerState(in_flight={})
    replication = HotPrefixReplication(history_window_s=10.0)
    for step in range(100):  # a conversation's prefix a second, each exploited once
        replication.record_ttft(state.ttft_samples(step), 0.1, float(step))
    replication.record_ttft(state.ttft_samples(3), 0.2, 100.0)  # an old conversation comes back
    state.expire(now=105.0, window_s=10.0)
    assert list(state.ttfts) == [95, 96, 97, 98, 99, 3]
    assert [ttft for _, ttft in state.ttfts[3]] == [0.2]


def test_windowed_samples_keep_a_running_sum_of_the_samples_since_the_horizon() -> None:
    samples = WindowedSamples()
    for now, value in [(0.0, 1.0), (1.0, 2.0), (2.0, 6.0)]:
        samples.add(now, value)
    assert (len(samples), samples.total, samples.mean()) == (3, 9.0, 3.0)
    samples.expire(horizon=1.0)
    assert (len(samples), samples.total) == (2, 8.0)
    samples.expire(horizon=5.0)
    assert (len(samples), samples.total) == (0, 0.0)


@pytest.mark.parametrize(
    ("ttfts", "hot"),
    [([(10, 0.1), (30, 0.1), (70, 0.2), (90, 0.2)], True), ([(10, 0.1), (70, 0.19)], False), ([(70, 1.0)], False)],
    ids=["doubled", "below-double", "one-half-empty"],
)
def test_a_prefix_is_hot_when_its_mean_ttft_doubles_between_the_halves_of_h(
    ttfts: list[tuple[float, float]], hot: bool
) -> None:
    replication = HotPrefixReplication(history_window_s=100.0)
    samples: deque[tuple[float, float]] = deque()
    for now, ttft in ttfts:
        replication.record_ttft(samples, ttft, now)
    assert replication.doubled(samples, now=100.0) is hot


def test_replicas_go_to_the_least_loaded_other_worker_and_expire_after_h() -> None:
    replication = HotPrefixReplication(history_window_s=100.0)
    loads = {"w0": 3.0, "w1": 2.0, "w2": 1.0}
    replication.replicate(9, "w2", list(loads), loads.__getitem__, now=10.0)
    replication.replicate(9, "w2", list(loads), loads.__getitem__, now=20.0)
    assert replication.replicas_of(9) == ["w1", "w0"]
    replication.forget_worker("w1")
    assert replication.replicas_of(9) == ["w0"]
    replication.expire(horizon=21.0)
    assert replication.replicas_of(9) == []


def test_a_removed_worker_comes_back_with_nothing_remembered() -> None:
    router = E2Router(rebalance_min_gap_s=0.0)
    for worker_id in ("w0", "w1"):
        router.add_worker(worker_id, now=0.0)
    prompt = tuple(range(100, 110))
    assert router.choose(RoutingRequest("a", 10 * BLOCK, prompt, BLOCK), now=0.0) == "w0"
    router.remove_worker("w0", now=1.0)
    router.add_worker("w0", now=1.0)
    assert (router.window_load("w0"), router.decode_ratio("w0")) == (0.0, 0.0)
    # The placed prompt is forgotten with its worker, so nothing is exploited on w0.
    router.choose(RoutingRequest("b", 10 * BLOCK, prompt, BLOCK), now=1.0)
    assert router.last_decision is not None and router.last_decision.phase == "explore"
