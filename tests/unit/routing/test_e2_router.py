"""E2 (Preble section 4.2): exploit, explore by L + M + P, prefill/decode balancing, Th_bal, replication."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import pytest
from forethought.domain import EngineStats
from forethought.routing import (
    E2Router,
    PrebleLinearPhaseTimes,
    RoutingRequest,
    build_router,
)

BLOCK = 16


@dataclass(frozen=True)
class MillisecondPerToken:
    """Prefill costs 1 ms per token; a decode iteration ``decode_s`` plus ``decode_s_per_context`` per
    context token."""

    decode_s: float = 0.0
    decode_s_per_context: float = 0.0

    def prefill_time(self, tokens: int) -> float:
        return 0.001 * tokens

    def decode_time(self, batch: int, context: int) -> float:
        return self.decode_s + self.decode_s_per_context * context


def make_request(
    rid: str, blocks: int, prefix: int | None = None, cached: dict[str, int] | None = None
) -> RoutingRequest:
    """Requests given the same ``prefix`` share their leading blocks; without one, a prompt of its own."""
    base = prefix if prefix is not None else 1_000_000 + zlib.crc32(rid.encode())
    hashes = tuple(base * 1000 + i for i in range(blocks))
    return RoutingRequest(rid, blocks * BLOCK, hashes, BLOCK, cached_blocks=cached or {})


def make_e2(workers: int = 2, decode_s: float = 0.0, decode_s_per_context: float = 0.0, **options: object) -> E2Router:
    router = E2Router(phase_times=MillisecondPerToken(decode_s, decode_s_per_context), **options)
    for index in range(workers):
        router.add_worker(f"w{index}", now=0.0)
    return router


def test_prefix_sharing_requests_exploit_the_caching_worker() -> None:
    router = make_e2(3)
    chosen = router.choose(make_request("r1", 4, prefix=7, cached={"w0": 3, "w2": 1}), now=1.0)
    assert chosen == "w0"
    assert router.last_decision is not None and router.last_decision.phase == "exploit"
    assert router.last_decision.costs == {"w0": pytest.approx(0.016)}
    chosen = router.choose(make_request("r2", 4, prefix=7, cached={"w0": 3, "w2": 1}), now=1.0)
    assert chosen == "w0"  # 0.016 s > 1.5 x 0 of the idle workers, but below the 2 s minimum gap
    assert router.last_decision.phase == "exploit"


def test_without_a_minimum_gap_any_load_against_an_idle_worker_counts_as_imbalance() -> None:
    router = make_e2(3, rebalance_min_gap_s=0.0)
    router.choose(make_request("busy", 10), now=0.0)  # w0 carries 0.16 s placed in H, and still waiting
    chosen = router.choose(make_request("r2", 4, prefix=7, cached={"w0": 3}), now=1.0)
    assert (chosen, router.last_decision.phase) == ("w1", "rebalance")
    assert router.last_decision.costs == {"w0": pytest.approx(0.336), "w1": pytest.approx(0.064)}


def test_rebalancing_never_shifts_a_request_that_would_make_the_light_worker_heavier() -> None:
    router = make_e2(2, rebalance_min_gap_s=0.0)
    router.choose(make_request("r1", 4, prefix=7, cached={"w0": 3}), now=1.0)  # w0: 0.016 s, w1 idle
    # Imbalanced (0.016 > 1.5 x 0), but recomputing 64 tokens on w1 (0.064 s) exceeds w0's 0.032 s.
    chosen = router.choose(make_request("r2", 4, prefix=7, cached={"w0": 3}), now=1.0)
    assert (chosen, router.last_decision.phase) == ("w0", "exploit")


def test_exploit_breaks_ties_between_holders_by_load_cost() -> None:
    router = make_e2(3)
    router.choose(make_request("busy", 10), now=0.0)  # w0 carries 0.16 s placed in H, and still waiting
    chosen = router.choose(make_request("r1", 4, cached={"w0": 3, "w1": 3}), now=1.0)
    assert chosen == "w1"
    assert router.last_decision.costs == {"w0": pytest.approx(0.336), "w1": pytest.approx(0.016)}


def test_a_prefix_placed_but_not_yet_reported_cached_is_exploited_where_it_was_placed() -> None:
    # Preble's global tree records the GPU when it assigns a request, not when the KV is reported cached:
    # a second request of a prompt still queued on w0 joins it instead of recomputing it elsewhere.
    router = make_e2(2, decode_s=0.001)
    router.choose(make_request("busy", 40), now=0.0)  # w0: a long prefill, so w1 looks lighter
    assert router.choose(make_request("first", 20, prefix=4), now=0.0) == "w1"
    chosen = router.choose(make_request("second", 21, prefix=4), now=0.1)  # no cache event yet
    assert (chosen, router.last_decision.phase) == ("w1", "exploit")
    assert router.assignment("second").missed_tokens == BLOCK
    router.on_finished("first", now=1.0)
    router.on_finished("second", now=1.0)
    # Once both left, only the prefix index can say the prompt is still cached.
    assert router.choose(make_request("third", 21, prefix=4), now=1.1) == "w1"
    assert router.last_decision.phase == "explore"


def test_explore_picks_the_least_load_cost_when_the_missed_part_dominates() -> None:
    router = make_e2(3)
    assert router.choose(make_request("a", 30), now=0.0) == "w0"
    assert router.choose(make_request("b", 10), now=0.1) == "w1"
    chosen = router.choose(make_request("c", 8, prefix=1, cached={"w0": 4}), now=0.2)  # 64 of 128 cached
    assert chosen == "w2"
    assert router.last_decision.phase == "explore"
    assert router.last_decision.costs == {  # a's and b's prefill placed in H, and still waiting: twice
        "w0": pytest.approx(2 * 0.48 + 0.064),
        "w1": pytest.approx(2 * 0.16 + 0.128),
        "w2": pytest.approx(0.128),
    }


@pytest.mark.parametrize(("threshold", "expected", "phase"), [(1.5, "w1", "rebalance"), (4.0, "w0", "exploit")])
def test_rebalancing_redirects_exploits_of_the_heaviest_worker_past_th_bal(
    threshold: float, expected: str, phase: str
) -> None:
    router = make_e2(2, rebalance_threshold=threshold, rebalance_min_gap_s=0.1)
    router.choose(make_request("a", 18), now=0.0)  # w0: 0.288 s
    router.choose(make_request("b", 6), now=0.0)  # w1: 0.096 s; 0.288 = 3.0 x 0.096
    chosen = router.choose(make_request("c", 4, prefix=2, cached={"w0": 3}), now=1.0)
    assert (chosen, router.last_decision.phase) == (expected, phase)


def test_a_decode_heavy_worker_takes_the_next_uncached_prompt() -> None:
    # Decode time keeps every load positive, so a huge Th_bal never fires.
    router = make_e2(2, decode_s=0.001, rebalance_threshold=1e9)
    router.choose(make_request("a", 50), now=0.0)  # w0 carries a long prefill
    router.choose(make_request("b", 4, cached={"w1": 4}), now=0.0)  # fully cached on w1: decode-only
    router.choose(make_request("c", 4, cached={"w0": 4}), now=0.0)  # decode-only on w0 too
    assert router.decode_ratio("w0") == 0.5 and router.decode_ratio("w1") == 1.0
    assert router.choose(make_request("d", 40, prefix=3), now=0.1) == "w1"
    assert router.last_decision.phase == "prefill_decode"
    router.on_finished("b", now=0.2)
    assert router.decode_ratio("w1") == 0.0


def test_load_leaves_the_history_window() -> None:
    router = make_e2(2, history_window_s=180.0)
    router.choose(make_request("a", 10), now=0.0)
    router.observe_ttft("a", 0.2, now=0.2)
    assert router.window_load("w0") == pytest.approx(0.16)
    router.choose(make_request("b", 1), now=180.5)
    router.observe_ttft("b", 0.1, now=180.6)
    assert router.window_load("w0") == pytest.approx(0.016)  # only b's own prefill is left


def test_eviction_cost_counts_the_lru_blocks_the_worker_would_evict_by_their_hits() -> None:
    router = make_e2(1, capacity_blocks=10)
    tool = (1, 2, 3, 4)
    router.choose(RoutingRequest("a", 6 * BLOCK, tool + (10, 11), BLOCK), now=0.0)
    router.choose(RoutingRequest("b", 6 * BLOCK, tool + (20, 21), BLOCK, cached_blocks={"w0": 4}), now=1.0)
    # 8 of 10 blocks used; LRU first: a's query (11, 10), b's query (21, 20), then the tool, leaf first.
    assert router.eviction_cost("w0", needed_blocks=2, now=2.0) == 0.0
    assert router.eviction_cost("w0", needed_blocks=4, now=2.0) == pytest.approx(0.032)  # a's query, 1 hit
    assert router.eviction_cost("w0", needed_blocks=6, now=2.0) == pytest.approx(0.064)
    # Two tool blocks go too: 32 tokens recomputed for each of the 2 requests that shared them.
    assert router.eviction_cost("w0", needed_blocks=8, now=2.0) == pytest.approx(0.064 + 0.032 * 2)
    # The request's own prefix is pinned by it, so only the unshared blocks can go.
    assert router.eviction_cost("w0", needed_blocks=8, now=2.0, keep=tool) == pytest.approx(0.064)
    assert router.eviction_cost("w0", needed_blocks=8, now=400.0) == 0.0  # hits left the window


def test_the_block_mirror_evicts_lru_blocks_past_capacity() -> None:
    router = make_e2(1, capacity_blocks=4)
    router.choose(RoutingRequest("a", 4 * BLOCK, (1, 2, 3, 4), BLOCK), now=0.0)
    router.choose(RoutingRequest("b", 3 * BLOCK, (1, 2, 7), BLOCK, cached_blocks={"w0": 2}), now=1.0)
    # a's leaves 4 and 3 were LRU; one made room for 7; a full 4-block prompt now evicts 3, 7, 2, 1.
    assert router.eviction_cost("w0", needed_blocks=4, now=2.0) == pytest.approx(0.016 + 0.016 + 0.032 * 2)


def test_capacity_comes_from_the_live_snapshot_when_not_configured() -> None:
    router = make_e2(1)
    router.choose(make_request("a", 8, prefix=5), now=0.0)
    assert router.eviction_cost("w0", needed_blocks=100, now=1.0) == 0.0  # capacity unknown
    router.observe_load("w0", EngineStats(total_kv_blocks=8), now=1.0)
    assert router.eviction_cost("w0", needed_blocks=1, now=1.0) == pytest.approx(0.016)  # a's leaf block


def test_decode_load_counts_requests_in_flight_at_the_iteration_time_of_their_batch() -> None:
    router = make_e2(1, decode_s=0.01, decode_s_per_context=1e-5)
    assert router.decode_tokens() == 45  # Preble's default decode length
    router.choose(make_request("a", 1), now=0.0)
    router.choose(make_request("b", 1), now=0.0)
    context = 2 * 16 + 2 * 45 / 2  # both prompts, and half the decode each on average
    prefill = 2 * 0.016 * 2  # placed in H, and still waiting
    assert router.window_load("w0") == pytest.approx(prefill + 2 * 45 * (0.01 + 1e-5 * int(context)))


def test_observed_output_lengths_replace_the_default_decode_length() -> None:
    router = make_e2(2, decode_s=0.01)
    router.choose(make_request("a", 1), now=0.0)  # w0
    router.on_finished("a", now=2.5, output_tokens=101)
    assert router.decode_tokens() == 101  # the average over the whole cluster
    assert router.decode_load("w0") == 0.0  # finished requests leave the decode part
    router.choose(make_request("b", 1), now=3.0)  # the idle w1 (w0 still has a's prefill in H)
    assert router.decode_load("w1") == pytest.approx(101 * 0.01)


def test_a_worker_decoding_long_contexts_looks_heavier_than_one_decoding_as_many_short_ones() -> None:
    # The loss this guards against: counting requests in flight alone, a worker decoding a 64-block
    # context looked as light as one decoding a 1-block one (E2 behind kv_cost on the Mooncake trace).
    router = make_e2(2, decode_s=0.01, decode_s_per_context=1e-4, rebalance_threshold=1e9)
    for worker in ("w0", "w1"):  # a request finished on each, at the same pace
        router.choose(make_request(f"done-{worker}", 1, prefix=5), now=0.0)
        assert router.assignment(f"done-{worker}").worker_id == worker
        router.observe_ttft(f"done-{worker}", 0.1, now=0.1)
        router.on_finished(f"done-{worker}", now=1.0, output_tokens=45)
    router.choose(make_request("long", 64, prefix=1), now=1.0)  # w0
    router.choose(make_request("short", 1, prefix=2), now=1.0)  # w1
    assert router.assignment("long").worker_id == "w0"
    later = 32.0  # the placements' prefill has left H (30 s): only the decode in flight is left
    assert router.decode_load("w0") > 2 * router.decode_load("w1")
    assert router.choose(make_request("next", 4, prefix=3), now=later) == "w1"


def test_a_worker_holding_unfinished_work_looks_heavier_than_one_that_finished_it() -> None:
    # The loss this guards against: load that only counts assignments in H cannot see a queue growing
    # on the worker that holds a hot prefix, so explored prompts kept landing there.
    router = make_e2(2, decode_s=0.01, rebalance_threshold=1e9)
    for index in range(4):
        router.choose(make_request(f"w0-{index}", 3, prefix=index, cached={"w0": 2}), now=0.0)  # exploits
    router.choose(make_request("w1-0", 8, prefix=9), now=0.0)  # explore: the idle w1
    router.on_finished("w1-0", now=1.0, output_tokens=45)
    prefill_in_h = {w: router.window_load(w) - router.decode_load(w) for w in ("w0", "w1")}
    assert prefill_in_h["w0"] < prefill_in_h["w1"]  # by its history alone w0 would look lighter
    assert router.choose(make_request("new", 8, prefix=10), now=1.5) == "w1"


def test_a_worker_whose_placed_prompts_still_wait_for_prefill_looks_heavier_than_one_that_started_them() -> None:
    # The loss this guards against: the window sum counts a placed prefill alike whether it already ran
    # or still queues, so on the Mooncake trace long prompts kept landing behind queued ones.
    router = make_e2(2, decode_s=0.01, rebalance_threshold=1e9)
    router.choose(make_request("started", 10), now=0.0)  # w0: 0.16 s of prefill, then its first token
    router.choose(make_request("waiting", 8), now=0.0)  # w1: 0.128 s, still queued
    router.observe_ttft("started", 0.2, now=0.2)
    assert router.window_load("w0") < router.window_load("w1")
    assert router.choose(make_request("next", 4), now=0.3) == "w0"
    waiting = router.window_load("w1")
    router.observe_ttft("waiting", 0.4, now=0.4)
    assert waiting - router.window_load("w1") == pytest.approx(0.128)  # its prefill is done; H still holds it


def test_a_prompt_that_does_not_fit_beside_the_requests_in_flight_waits_for_a_share_of_their_decode() -> None:
    router = make_e2(1, decode_s=0.01, capacity_blocks=100)
    router.choose(make_request("a", 40), now=0.0)
    router.choose(make_request("b", 40), now=0.0)
    assert router.memory_wait("w0", make_request("small", 5)) == 0.0
    held = 80 + 2 * 45 / BLOCK / 2  # both prompts, and their decodes at mid-length (45 tokens expected)
    overflow = held + 40 + 45 / BLOCK - 100
    drain = router.decode_load("w0") / 2  # the batch of two decoding 45 tokens
    assert router.memory_wait("w0", make_request("big", 40)) == pytest.approx(drain * overflow / held)
    # the blocks of a prompt the requests in flight already hold are not needed again
    assert router.memory_wait("w0", make_request("follow-up", 40, prefix=router_prefix("a"))) == 0.0
    router.on_finished("a", now=1.0, output_tokens=45)
    assert router.memory_wait("w0", make_request("big", 40)) == 0.0


def router_prefix(rid: str) -> int:
    """The ``prefix`` that gives a request the blocks of ``make_request(rid, ...)``."""
    return 1_000_000 + zlib.crc32(rid.encode())


def test_explore_avoids_a_worker_whose_running_requests_hold_the_memory_a_prompt_needs() -> None:
    # The loss this guards against: by load alone two workers decoding one request each look alike,
    # though one holds 90 of its 100 blocks and a 30-block prompt would wait there (kv_cost, which
    # balances blocks in use, was ahead of E2 on the Mooncake trace's p99).
    router = make_e2(2, decode_s=0.05, capacity_blocks=100, rebalance_threshold=1e9, history_window_s=30.0)
    router.choose(make_request("warm", 90, prefix=1), now=0.0)
    router.on_finished("warm", now=0.5, output_tokens=45)
    router.choose(make_request("held", 90, prefix=1, cached={"w0": 80}), now=1.0)
    router.choose(make_request("small", 30, prefix=2), now=1.0)
    assert (router.assignment("held").worker_id, router.assignment("small").worker_id) == ("w0", "w1")
    router.observe_ttft("held", 0.5, now=1.5)
    router.observe_ttft("small", 0.5, now=1.5)
    wait = router.memory_wait("w0", make_request("next", 30, prefix=3))
    assert wait > 0.0 and router.memory_wait("w1", make_request("next", 30, prefix=3)) == 0.0
    later = 40.0  # the prefill placed has left H (30 s), and with it every cached block's hits
    assert router.choose(make_request("next", 30, prefix=3), now=later) == "w1"
    costs = router.last_decision.costs
    assert costs["w0"] - wait == pytest.approx(costs["w1"])  # but for the wait, a tie


def hot_prefix_request(rid: str, cached: dict[str, int]) -> RoutingRequest:
    """50 blocks of prefix 9 shared, then a block of the request's own."""
    shared = make_request(rid, 50, prefix=9).block_hashes
    return RoutingRequest(rid, 51 * BLOCK, shared + make_request(rid, 1).block_hashes, BLOCK, cached_blocks=cached)


def test_a_hot_prefix_whose_ttft_doubles_on_an_overloaded_worker_is_replicated() -> None:
    router = make_e2(2, decode_s=0.001, history_window_s=100.0, rebalance_min_gap_s=0.1)
    router.choose(make_request("on-w0", 18), now=0.0)  # w0: 0.288 s prefill + 0.045 s decode
    router.choose(make_request("on-w1", 6), now=0.0)  # w1: 0.096 s + 0.045 s, past Th_bal below w0
    hot = {"w0": 50}  # 800 of 816 tokens cached: recomputing them on w1 (0.8 s) never pays off
    for step, ttft in enumerate([0.1, 0.1, 0.1, 0.3, 0.3]):
        now = 10.0 + step * 20.0
        rid = f"h{step}"
        assert router.choose(hot_prefix_request(rid, hot), now=now) == "w0"
        assert router.last_decision.phase == "exploit"
        router.observe_ttft(rid, ttft, now=now + 1.0)
    assert router.replicas(9049) == frozenset({"w1"})
    router.choose(hot_prefix_request("next", hot), now=95.0)
    assert set(router.last_decision.costs) == {"w0", "w1"}


def test_a_doubled_ttft_on_a_balanced_cluster_is_not_replicated() -> None:
    router = make_e2(2, decode_s=0.001, history_window_s=100.0, rebalance_threshold=1e9)
    router.choose(make_request("on-w0", 18), now=0.0)
    router.choose(make_request("on-w1", 6), now=0.0)
    for step, ttft in enumerate([0.1, 0.1, 0.1, 0.3, 0.3]):
        rid = f"h{step}"
        router.choose(make_request(rid, 51, prefix=9, cached={"w0": 50}), now=10.0 + step * 20.0)
        router.observe_ttft(rid, ttft, now=11.0 + step * 20.0)
    assert router.replicas(9049) == frozenset()


def test_registry_builds_e2_with_paper_defaults() -> None:
    router = build_router("e2")
    assert isinstance(router, E2Router)
    assert (router.history_window_s, router.rebalance_threshold) == (180.0, 1.5)
    assert isinstance(router.phase_times, PrebleLinearPhaseTimes)
    assert router.phase_times.prefill_time(1000) == pytest.approx(0.115)
