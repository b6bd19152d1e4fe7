"""BROS Algorithm 1 against the baselines, Preble's priority groups, adaptive batch size, dropping."""

from __future__ import annotations

from itertools import pairwise

import pytest
from forethought.domain import ServiceClass
from forethought.engine.batch_size import AdaptiveBatchSize
from forethought.engine.priority_groups import priority_group, proportional_order

from tests.unit.engine.conftest import step_until_idle

RT, BE = ServiceClass.RT, ServiceClass.BE


def _first_token_times(steps) -> dict[str, float]:
    first: dict[str, float] = {}
    for start, out in steps:
        for request_id in out.new_tokens:
            first.setdefault(request_id, start + out.duration_s)
    return first


def test_most_urgent_rt_is_served_first(make_engine, make_request, run_until_idle) -> None:
    outcomes = {}
    for policy in ("bros", "fcfs"):
        engine = make_engine(policy=policy, max_batch_size=1, initial_batch_size=1)
        engine.add_request(make_request("relaxed", prompt_len=200, service_class=RT, ttft_slo_s=5.0), 0.0)
        engine.add_request(make_request("urgent", prompt_len=200, service_class=RT, ttft_slo_s=0.05), 0.0)
        first = _first_token_times(run_until_idle(engine))
        outcomes[policy] = sorted(first, key=first.__getitem__)
    assert outcomes == {"bros": ["urgent", "relaxed"], "fcfs": ["relaxed", "urgent"]}


def _overload(make_engine, make_request, run_until_idle, policy: str) -> tuple[int, int, int]:
    """Eight long BE prompts arrive just before four chatty RT requests; returns SLO hits and BE done."""
    engine = make_engine(policy=policy, num_blocks=1024)
    for i in range(8):
        engine.add_request(make_request(f"be{i}", prompt_len=1500, max_tokens=64), 0.0)
    for i in range(4):
        engine.add_request(
            make_request(f"rt{i}", prompt_len=100, max_tokens=16, service_class=RT,
                         ttft_slo_s=0.4, tpot_slo_s=0.2), 0.01 + 0.01 * i)
    steps = run_until_idle(engine, now=0.01)
    outcomes = {rid: o for _, out in steps for rid, o in out.finished.items()}
    ttft_met = sum(1 for rid, o in outcomes.items() if rid.startswith("rt") and o.usage.ttft_s <= 0.4)
    token_times: dict[str, list[float]] = {}
    for start, out in steps:
        for rid in out.new_tokens:
            token_times.setdefault(rid, []).append(start + out.duration_s)
    tpot_met = sum(
        1 for rid, times in token_times.items()
        if rid.startswith("rt") and all(b - a <= 0.2 for a, b in zip(times, times[1:]))
    )
    be_done = sum(1 for rid in outcomes if rid.startswith("be"))
    return ttft_met, tpot_met, be_done


def test_bros_meets_rt_slos_that_fcfs_misses(make_engine, make_request, run_until_idle) -> None:
    bros = _overload(make_engine, make_request, run_until_idle, "bros")
    fcfs = _overload(make_engine, make_request, run_until_idle, "fcfs")
    assert bros == (4, 4, 8)  # every RT meets TTFT and TPOT; every BE still finishes
    assert fcfs[0] < 4


def test_rt_drops_be_only_when_nothing_else_frees_memory(make_engine, make_request) -> None:
    engine = make_engine(num_blocks=4, block_size=16, host_tier_blocks=0)
    engine.add_request(make_request("be", prompt_len=60, max_tokens=4), 0.0)
    engine.step(0.0)  # BE holds 60 of 64 slots
    engine.add_request(make_request("rt", prompt_len=40, service_class=RT, ttft_slo_s=0.4, max_tokens=2), 0.1)
    out = engine.step(0.1)
    assert out.metrics.preemptions == 1 and out.metrics.rt_requests == 1
    assert engine.request("be").num_computed_tokens == 0  # dropped, recomputed later


def test_rt_overwrites_be_slots_with_lazy_checkpoint_instead_of_dropping(
    make_engine, make_request, run_until_idle
) -> None:
    engine = make_engine(num_blocks=4, block_size=16, host_tier_blocks=4, prefix_cache=False,
                         initial_batch_size=2, max_batch_size=2)
    engine.add_request(make_request("be", prompt_len=60, max_tokens=4), 0.0)
    engine.step(0.0)  # BE holds 60 slots: three full blocks and 12 slots of the fourth
    engine.add_request(make_request("rt", prompt_len=40, service_class=RT, ttft_slo_s=0.4, max_tokens=2), 0.1)
    out = engine.step(0.1)
    # RT takes the 4 empty slots, then overwrites 36 BE slots, copying only those to the host tier.
    assert (out.metrics.preemptions, out.metrics.checkpointed_slots, out.metrics.rt_requests) == (0, 36, 1)
    assert engine.block_manager.checkpointed_slots("be") == 36
    steps = run_until_idle(engine, now=0.2)
    checkpointed = 36 + sum(o.metrics.checkpointed_slots for _, o in steps)
    assert sum(o.metrics.restored_slots for _, o in steps) == checkpointed
    assert {rid for _, o in steps for rid in o.finished} == {"rt", "be"}


def test_be_with_slack_rt_in_a_full_batch_takes_its_place(make_engine, make_request) -> None:
    engine = make_engine(initial_batch_size=1, max_batch_size=1)
    engine.add_request(make_request("be", prompt_len=60, max_tokens=4), 0.0)
    engine.add_request(make_request("rt", prompt_len=40, service_class=RT, ttft_slo_s=5.0, max_tokens=2), 0.0)
    out = engine.step(0.0)
    assert (out.metrics.rt_requests, out.metrics.be_requests) == (0, 1)


@pytest.mark.parametrize(("ratio", "group"), [(0.0, 0), (0.63, 6), (0.999, 9), (1.0, 10)])
def test_priority_group_of_cached_ratio(ratio: float, group: int) -> None:
    assert priority_group(ratio, 10) == group


def test_proportional_picks_favour_better_cached_groups_without_starving() -> None:
    ratios = {"a0": 0.0, "b0": 0.05, "c9": 0.95, "d9": 0.9, "e9": 0.92, "f5": 0.5}
    order = proportional_order(list(ratios), ratios.__getitem__, 10)
    # group 9 takes up to 10 per round, group 5 up to 6, group 0 one per round: arrival order inside groups
    assert order == ["c9", "d9", "e9", "f5", "a0", "b0"]
    assert proportional_order(list(ratios), ratios.__getitem__, 0) == list(ratios)


def test_adaptive_batch_size_grows_every_iteration_without_backoff_and_resets_on_backoff() -> None:
    size = AdaptiveBatchSize(initial=2, maximum=4)
    size.update(backed_off=False)
    assert size.current == 3
    size.update(backed_off=False)
    size.update(backed_off=False)
    assert size.current == 4  # capped at the maximum
    size.update(backed_off=True)
    assert size.current == 2


def test_steady_rt_arrivals_beside_be_keep_meeting_tpot(make_engine, make_request) -> None:
    """RT keeps arriving beside queued BE work and soon outnumbers the initial batch size: the batch must
    still grow (BE taking a slack RT's place must not freeze it), and a deadline no batch can meet any more
    must not back it off every iteration, or running RT requests go undecoded past their TPOT."""
    engine = make_engine(policy="bros", profile="llama-13b-a100", num_blocks=2048, initial_batch_size=2)
    for i in range(16):
        engine.add_request(make_request(f"be{i}", prompt_len=256, max_tokens=64), 0.0)
    arrivals = [(0.2 * i, f"rt{i}") for i in range(40)]
    token_times: dict[str, list[float]] = {}
    now = 0.0
    while arrivals or engine.has_work():
        while arrivals and arrivals[0][0] <= now:
            at, rid = arrivals.pop(0)
            engine.add_request(make_request(rid, prompt_len=64, max_tokens=40, service_class=RT,
                                            ttft_slo_s=0.4, tpot_slo_s=0.2), at)
        if not engine.has_work():
            now = arrivals[0][0]
            continue
        out = engine.step(now)
        now += out.duration_s
        for rid in out.new_tokens:
            token_times.setdefault(rid, []).append(now)
    rt_times = [times for rid, times in token_times.items() if rid.startswith("rt")]
    gaps = [b - a for times in rt_times for a, b in pairwise(times)]
    assert len(rt_times) == 40 and max(gaps) <= 0.2


def test_be_prefill_takes_the_chunk_that_fits_the_rt_residual(make_engine, make_request) -> None:
    """A whole BE prompt would overrun the decoding RT's TPOT residual; a shorter chunk still runs."""
    engine = make_engine(policy="bros", profile="llama-13b-a100", num_blocks=1024)
    engine.add_request(make_request("rt", prompt_len=64, max_tokens=8, service_class=RT,
                                    ttft_slo_s=0.4, tpot_slo_s=0.2), 0.0)
    first = engine.step(0.0)
    engine.add_request(make_request("be", prompt_len=2000, max_tokens=4), first.duration_s)
    out = engine.step(first.duration_s)
    assert (out.metrics.rt_requests, out.metrics.be_requests) == (1, 1)
    assert 0 < out.metrics.be_prefill_tokens < 2000
    assert out.duration_s <= 0.2


def test_after_rt_arrivals_be_prefills_are_chunked_so_the_next_arrival_waits_a_third_of_its_objective(
        make_engine, make_request) -> None:
    """Without RT in sight BE prefills fill the token budget; once RT requests with a 1 s TTFT objective
    have arrived, an iteration of BE alone stops at a third of it, so an RT arriving mid-way still fits."""
    def be_iteration(engine, now: float) -> float:
        for index in range(8):
            engine.add_request(make_request(f"be-{index}", prompt_len=256, max_tokens=4), now)
        return engine.step(now).duration_s

    def after_rt(ttft_slo_s: float) -> float:
        engine = make_engine(policy="bros", profile="smollm2-135m-cpu2", num_blocks=1024)
        engine.add_request(make_request("rt", prompt_len=16, max_tokens=1, service_class=RT, ttft_slo_s=ttft_slo_s), 0.0)
        finished = step_until_idle(engine)
        return be_iteration(engine, finished[-1][0] + finished[-1][1].duration_s)

    unguarded = be_iteration(make_engine(policy="bros", profile="smollm2-135m-cpu2", num_blocks=1024), 0.0)
    assert unguarded > 1.0  # 2,048 prompt tokens at once: an RT arriving now would miss 1 s before it starts
    assert 0 < after_rt(1.0) <= 1.0 / 3
    # An RT request whose objective its wait at the scheduler used up bounds nothing: BE is not starved for it.
    assert after_rt(0.001) == unguarded


def test_urgent_rt_prefill_leaves_running_rt_decodes_within_their_tpot(make_engine, make_request) -> None:
    """Heavy RT load: a long RT prompt with the earliest deadline must not push the running decodes out of
    the batch (adaptive size backed off to its initial 2) or past their 0.2 s TPOT (a whole 2,048-token
    chunk is about 0.36 s on a 13B model); it takes the chunk that fits beside them."""
    engine = make_engine(profile="llama-13b-a100", num_blocks=1024, initial_batch_size=2, max_batch_size=16)
    for i in range(6):
        engine.add_request(make_request(f"rt{i}", prompt_len=32, max_tokens=50, service_class=RT,
                                        ttft_slo_s=0.4, tpot_slo_s=0.2), 0.0)
    now = 0.0
    while any(engine.request(f"rt{i}").first_token_s is None for i in range(6)):
        now += engine.step(now).duration_s
    engine.add_request(make_request("long", prompt_len=2000, service_class=RT, ttft_slo_s=0.01,
                                    tpot_slo_s=0.2), now)
    out = engine.step(now)
    assert out.metrics.rt_decode_tokens == 6
    assert 0 < out.metrics.rt_prefill_tokens < 2000
    assert out.duration_s <= 0.2


def test_rt_decode_drops_newest_be_first_and_keeps_every_rt(make_engine, make_request) -> None:
    engine = make_engine(num_blocks=3, block_size=16, host_tier_blocks=0, prefix_cache=False,
                         bidirectional_kv=False)
    engine.add_request(make_request("relaxed", prompt_len=16, service_class=RT, ttft_slo_s=5.0,
                                    tpot_slo_s=5.0, max_tokens=8), 0.0)
    engine.add_request(make_request("be-old", prompt_len=16, max_tokens=8), 0.0)
    engine.add_request(make_request("be-new", prompt_len=16, max_tokens=8), 0.0)
    engine.step(0.0)  # three full blocks: every decode now needs a new block
    out = engine.step(0.1)
    assert out.metrics.preemptions == 1 and "relaxed" in out.new_tokens
    assert engine.request("be-new").num_computed_tokens == 0  # dropped: the newest BE goes first
    assert engine.request("be-old").num_computed_tokens == 16 and engine.block_manager.tokens_held("be-old") == 16


def test_bros_drop_order_is_be_newest_first_then_rt_by_remaining_time(make_engine, make_request) -> None:
    engine = make_engine(policy="bros")
    specs = [("rt-soon", RT, 0.4), ("rt-late", RT, 2.0), ("be-old", BE, 0.0), ("be-new", BE, 0.0)]
    for request_id, service_class, ttft in specs:
        engine.add_request(make_request(request_id, service_class=service_class, ttft_slo_s=ttft), 0.0)
    requests = [engine.request(request_id) for request_id, _, _ in specs]
    rank = engine.scheduler.policy.rank
    victims_first = [r.request_id for r in sorted(requests, key=rank, reverse=True)]
    assert victims_first == ["be-new", "be-old", "rt-late", "rt-soon"]
    # A request may drop only those ranked behind it: an RT never drops a more urgent RT.
    assert not rank(engine.request("rt-soon")) > rank(engine.request("rt-late"))


def test_fcfs_is_blind_to_class_and_priority_as_vllm(make_engine, make_request, run_until_idle) -> None:
    engine = make_engine(policy="fcfs", max_batch_size=1, initial_batch_size=1)
    engine.add_request(make_request("be-first", max_tokens=2), 0.0)
    engine.add_request(make_request("rt-second", service_class=RT, ttft_slo_s=0.4, max_tokens=2), 0.0)
    engine.set_priority("rt-second", -1)
    order = [rid for _, out in run_until_idle(engine) for rid in out.finished]
    assert order == ["be-first", "rt-second"]


def test_rt_prefill_behind_a_decode_drops_be_when_the_host_tier_is_full(make_engine, make_request) -> None:
    engine = make_engine(num_blocks=6, block_size=16, host_tier_blocks=0, prefix_cache=False)
    engine.add_request(make_request("rt-a", prompt_len=15, service_class=RT, ttft_slo_s=5.0,
                                    tpot_slo_s=5.0, max_tokens=8), 0.0)
    engine.add_request(make_request("be", prompt_len=80, max_tokens=8), 0.0)
    engine.step(0.0)  # rt-a: 15 slots of one block; be: five full blocks; no room left to checkpoint to
    engine.add_request(make_request("rt-b", prompt_len=20, service_class=RT, ttft_slo_s=0.4, max_tokens=2), 0.1)
    out = engine.step(0.1)
    # rt-b is not the batch's head (rt-a's decode is), yet BE-held memory is dropped for it.
    assert out.metrics.rt_requests == 2 and out.metrics.preemptions == 1
    assert engine.request("rt-b").num_computed_tokens == 20
    assert engine.request("be").num_computed_tokens == 0
