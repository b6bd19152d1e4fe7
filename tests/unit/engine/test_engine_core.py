"""Engine core: prefix hits, cache events, token streams, stop conditions, determinism, validation."""

from __future__ import annotations

import pytest
from forethought.domain import BlockStored, FinishReason, SamplingParams, ServiceClass
from forethought.domain.block_hashes import ROOT_PARENT, chained_block_hashes
from forethought.engine.core import EngineConfig


def test_prefix_hit_skips_the_cached_prefill(make_engine, make_request, run_until_idle) -> None:
    engine = make_engine(block_size=16)
    shared = tuple(range(1000, 1064))  # four full blocks
    first = shared + (1, 2, 3)
    second = shared + (7, 8, 9, 10)
    engine.add_request(make_request("first", prompt=first, max_tokens=2), 0.0)
    first_steps = run_until_idle(engine)
    stored = [e for _, out in first_steps for e in out.cache_events if isinstance(e, BlockStored)]
    assert stored == [BlockStored(tuple(chained_block_hashes(shared, 16)), ROOT_PARENT, shared, 16)]

    engine.add_request(make_request("second", prompt=second, max_tokens=2), 5.0)
    steps = run_until_idle(engine, now=5.0)
    assert steps[0][1].metrics.prefix_hit_tokens == 64
    assert steps[0][1].metrics.be_prefill_tokens == len(second) - 64
    (outcome,) = [o for _, out in steps for o in out.finished.values()]
    assert outcome.usage.cached_prompt_tokens == 64 and outcome.usage.prompt_tokens == 68
    assert engine.stats().prefix_hit_ratio == pytest.approx(64 / (67 + 68))


def test_tokens_stream_until_max_tokens_and_slots_are_freed(make_engine, make_request, run_until_idle) -> None:
    engine = make_engine()
    engine.add_request(make_request("r", prompt_len=40, max_tokens=5), 0.0)
    steps = run_until_idle(engine)
    tokens = [t for _, out in steps for t in out.new_tokens.get("r", ())]
    assert len(tokens) == 5 and all(0 <= t < 49152 for t in tokens)
    (outcome,) = [o for _, out in steps for o in out.finished.values()]
    assert outcome.finish_reason == FinishReason.LENGTH and outcome.usage.output_tokens == 5
    assert outcome.usage.ttft_s == pytest.approx(steps[0][1].duration_s)
    usage = engine.block_manager.usage()
    assert usage.rt_slots == usage.be_slots == usage.sealed_in_use_slots == 0


def test_stop_token_ends_the_request_unless_it_is_eos_and_ignored(make_engine, make_request, run_until_idle) -> None:
    engine = make_engine()
    engine.token_ids_for = lambda request, index: 7 if index == 2 else 100 + index
    engine.add_request(make_request("stop", sampling=SamplingParams(stop_token_ids=(7,)), max_tokens=9), 0.0)
    engine.add_request(make_request("plain", max_tokens=4), 0.0)
    outcomes = {rid: o for _, out in run_until_idle(engine) for rid, o in out.finished.items()}
    assert outcomes["stop"].finish_reason == FinishReason.STOP and outcomes["stop"].usage.output_tokens == 3
    assert outcomes["plain"].finish_reason == FinishReason.LENGTH

    eos_engine = make_engine(eos_token_id=7)
    eos_engine.token_ids_for = engine.token_ids_for
    eos_engine.add_request(make_request("eos", max_tokens=5), 0.0)
    eos_engine.add_request(make_request("ignore", max_tokens=5, sampling=SamplingParams(ignore_eos=True)), 0.0)
    outcomes = {rid: o for _, out in run_until_idle(eos_engine) for rid, o in out.finished.items()}
    assert outcomes["eos"].usage.output_tokens == 3
    assert outcomes["ignore"].usage.output_tokens == 5


def _trace(make_engine, make_request, run_until_idle, policy: str) -> list[tuple]:
    engine = make_engine(num_blocks=40, policy=policy)
    for i in range(12):
        cls = ServiceClass.RT if i % 3 == 0 else ServiceClass.BE
        engine.add_request(
            make_request(f"r{i}", prompt_len=20 + 13 * i, max_tokens=3 + i % 5, service_class=cls,
                         ttft_slo_s=0.4 if cls == ServiceClass.RT else 0.0), i * 0.01)
    return [(start, out.duration_s, dict(out.new_tokens), tuple(out.finished)) for start, out in
            run_until_idle(engine)]


@pytest.mark.parametrize("policy", ["bros", "fcfs", "round_robin"])
def test_same_workload_gives_the_same_schedule(make_engine, make_request, run_until_idle, policy) -> None:
    first = _trace(make_engine, make_request, run_until_idle, policy)
    assert first == _trace(make_engine, make_request, run_until_idle, policy)
    assert sum(len(finished) for *_, finished in first) == 12


def test_abort_frees_the_request(make_engine, make_request) -> None:
    engine = make_engine()
    engine.add_request(make_request("r", prompt_len=50, max_tokens=50), 0.0)
    engine.step(0.0)
    assert engine.block_manager.usage().be_slots > 0
    assert engine.abort("r", 0.1) and not engine.abort("r", 0.2)
    assert not engine.has_work() and engine.block_manager.usage().be_slots == 0


def test_priority_can_change_while_waiting(make_engine, make_request, run_until_idle) -> None:
    engine = make_engine(policy="priority", max_batch_size=1, initial_batch_size=1)
    engine.add_request(make_request("early", max_tokens=1), 0.0)
    engine.add_request(make_request("late", max_tokens=1), 0.0)
    engine.set_priority("late", -1)
    order = [rid for _, out in run_until_idle(engine) for rid in out.finished]
    assert order == ["late", "early"]
    with pytest.raises(KeyError):
        engine.set_priority("gone", 0)


@pytest.mark.parametrize(
    ("field", "value"),
    [("num_blocks", 0), ("block_size", -1), ("policy", "lifo"), ("initial_batch_size", 999),
     ("arrival_guard_share", 0.0)],
)
def test_config_rejects_bad_values(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        EngineConfig(**{"num_blocks": 8, field: value})


def test_requests_that_can_never_fit_are_rejected(make_engine, make_request) -> None:
    engine = make_engine(num_blocks=2, block_size=16)
    with pytest.raises(ValueError, match="max_tokens"):
        engine.add_request(make_request("big", prompt_len=30, max_tokens=10), 0.0)


def test_a_newcomer_is_not_pinned_and_released_every_iteration(make_engine, make_request, run_until_idle) -> None:
    """20 blocks of 16: "b" decodes in 13 of them, "a" left 2 cached prompt blocks, 5 are free. "w" reads
    those 2 and needs 100 more tokens. Counted as free, its own cached blocks promised 7 blocks; reading
    them leaves 5, so it was pinned, refused and released in each of b's 60 iterations. Now it starts with
    the 79 tokens that fit, is dropped once when b needs a block, and comes back when b is done."""
    rt = ServiceClass.RT
    engine = make_engine(num_blocks=20, block_size=16, host_tier_blocks=0)
    prompt_a = tuple(range(1000, 1033))
    engine.add_request(make_request("a", prompt=prompt_a, max_tokens=1, service_class=rt), 0.0)
    now = run_until_idle(engine)[-1][0] + 1.0
    engine.add_request(make_request("b", prompt_len=200, max_tokens=60, service_class=rt), now)
    now += engine.step(now).duration_s
    engine.add_request(make_request("w", prompt=prompt_a[:32] + tuple(range(5000, 5100)), max_tokens=2,
                                    service_class=rt), now)
    manager, acquired = engine.block_manager, []
    acquire_cached = manager.acquire_cached
    manager.acquire_cached = lambda request_id, hashes: acquired.append(request_id) or acquire_cached(request_id, hashes)
    steps = run_until_idle(engine, now)
    admitted = [(index, out.metrics.prefix_hit_tokens, out.metrics.rt_prefill_tokens)
                for index, (_, out) in enumerate(steps) if out.metrics.rt_prefill_tokens]
    assert acquired == ["w", "w"]
    assert admitted == [(0, 32, 79), (59, 48, 84)]
    assert [index for index, (_, out) in enumerate(steps) if out.metrics.preemptions] == [8]
    assert len(steps) == 61 and manager.usage().free_slots + manager.usage().evictable_slots == 320
