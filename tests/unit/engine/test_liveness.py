"""Liveness under memory pressure: every iteration of an engine with work computes something, and every
request finishes (BROS section 5.2's progressive dropping must always leave someone able to run)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from forethought.costmodel import CostModelExecutor, get_profile
from forethought.domain import GenerationRequest, ServiceClass
from forethought.engine.core import EngineConfig, EngineCore
from hypothesis import given, settings
from hypothesis import strategies as st

RT, BE = ServiceClass.RT, ServiceClass.BE
BLOCK_SIZE = 4
SHARED_PREFIXES = (tuple(range(1000, 1012)), tuple(range(2000, 2008)), ())


@dataclass(frozen=True)
class Arrival:
    at_s: float
    request: GenerationRequest


def drive(engine: EngineCore, arrivals: list[Arrival], max_steps: int = 3_000) -> set[str]:
    """Steps ``engine`` like the simulator: arrivals join at their times, an idle engine skips ahead.

    Fails when an iteration of an engine with work computes nothing (the simulator would put it to sleep
    for good) or when the run does not end within ``max_steps`` iterations; returns the finished ids.
    """
    pending = sorted(arrivals, key=lambda a: a.at_s)
    finished: set[str] = set()
    now = 0.0
    for _ in range(max_steps):
        while pending and pending[0].at_s <= now:
            engine.add_request(pending.pop(0).request, now)
        if not engine.has_work():
            if not pending:
                return finished
            now = pending[0].at_s
            continue
        output = engine.step(now)
        assert output.metrics.batch_size > 0, f"stalled at {now:.3f}s with work left"
        finished.update(output.finished)
        now += output.duration_s
    raise AssertionError(f"not done after {max_steps} iterations: {len(finished)} finished")


@st.composite
def requests(draw: st.DrawFn, index: int, capacity: int) -> Arrival:
    prefix = draw(st.sampled_from(SHARED_PREFIXES))
    suffix = draw(st.integers(1, min(14, capacity - 1)))
    max_tokens = draw(st.integers(1, min(8, capacity - suffix)))
    prompt = prefix[: capacity - suffix - max_tokens] + tuple(range(10 * index, 10 * index + suffix))
    is_rt = draw(st.booleans())
    request = GenerationRequest(
        request_id=f"r{index}",
        prompt_token_ids=prompt,
        max_tokens=max_tokens,
        service_class=RT if is_rt else BE,
        priority=draw(st.integers(0, 1)),
        ttft_slo_s=draw(st.sampled_from([0.0, 0.0, 0.02, 0.5])) if is_rt else 0.0,
        tpot_slo_s=draw(st.sampled_from([0.0, 0.02])) if is_rt else 0.0,
    )
    return Arrival(draw(st.sampled_from([0.0, 0.0, 0.01, 0.05])), request)


@st.composite
def workloads(draw: st.DrawFn) -> tuple[dict[str, object], list[Arrival]]:
    initial_batch = draw(st.integers(1, 3))
    config: dict[str, object] = {
        "num_blocks": draw(st.integers(3, 10)),
        "block_size": BLOCK_SIZE,
        "policy": draw(st.sampled_from(["bros", "fcfs", "round_robin"])),
        "bidirectional_kv": draw(st.booleans()),
        "prefix_cache": draw(st.booleans()),
        "host_tier_blocks": draw(st.integers(0, 2)),
        "initial_batch_size": initial_batch,
        "max_batch_size": initial_batch + draw(st.integers(0, 3)),
        "chunked_prefill_tokens": draw(st.sampled_from([6, 16, 64])),
    }
    capacity = int(config["num_blocks"]) * BLOCK_SIZE
    count = draw(st.integers(1, 8))
    return config, [draw(requests(index, capacity)) for index in range(count)]


@settings(max_examples=300, deadline=None)
@given(workload=workloads())
def test_every_request_finishes_under_memory_pressure(workload) -> None:
    config, arrivals = workload
    executor = CostModelExecutor(get_profile("llama-7b-a100"))
    engine = EngineCore(EngineConfig(**config), executor)
    assert drive(engine, arrivals) == {a.request.request_id for a in arrivals}
    usage = engine.block_manager.usage()
    assert usage.rt_slots == usage.be_slots == usage.sealed_in_use_slots == usage.host_slots == 0


@pytest.mark.parametrize("policy", ["bros", "fcfs", "round_robin"])
def test_rt_requests_without_slos_cannot_block_each_other(make_engine, make_request, policy) -> None:
    """Three RT prompts without SLOs outgrow memory together; equal (infinite) deadlines must still order
    them, so the first can drop the others instead of all three waiting for memory forever."""
    engine = make_engine(num_blocks=8, block_size=16, chunked_prefill_tokens=32, policy=policy)
    arrivals = [Arrival(0.0, make_request(f"r{i}", prompt_len=60, max_tokens=10, service_class=RT))
                for i in range(3)]
    assert drive(engine, arrivals) == {"r0", "r1", "r2"}


def test_prefix_blocks_pinned_by_newcomers_cannot_starve_the_first_ranked_request() -> None:
    """Found by the property above: r1 (first-ranked once r2 had its first token) could not fit while the
    newcomer behind it in the batch pinned its cached prefix, so r1 dropped r2 every iteration and never
    ran; r2 and the BE r0 then dropped each other for good. The first-ranked request now unpins them."""
    config = EngineConfig(num_blocks=9, block_size=BLOCK_SIZE, policy="bros", bidirectional_kv=False,
                          host_tier_blocks=0, initial_batch_size=3, max_batch_size=3, chunked_prefill_tokens=16)
    engine = EngineCore(config, CostModelExecutor(get_profile("llama-7b-a100")))
    shared = SHARED_PREFIXES[1]
    prompts = {"r0": (*shared, 0), "r1": (*SHARED_PREFIXES[0], *range(10, 22)), "r2": (*shared, *range(20, 32))}
    specs = {"r0": (BE, 2, 0.0), "r1": (RT, 6, 0.02), "r2": (RT, 2, 0.02)}
    arrivals = [Arrival(0.0, GenerationRequest(request_id=rid, prompt_token_ids=prompts[rid], max_tokens=tokens,
                                               service_class=cls, ttft_slo_s=ttft))
                for rid, (cls, tokens, ttft) in specs.items()]
    assert drive(engine, arrivals) == {"r0", "r1", "r2"}
