"""BrosVllmScheduler: BROS priorities as pure functions; RT-first preemption on a real engine, with control."""

from __future__ import annotations

import asyncio
import math

import pytest
from forethought.backends.vllm.backend import VllmEngineBackend, VllmEngineOptions
from forethought.backends.vllm.bros_scheduler import (
    BE_PRIORITY_BASE,
    BrosVllmScheduler,
    SloTerms,
    bros_priority,
    next_token_deadline,
    read_terms,
    slo_extra_args,
)
from forethought.domain import GenerationRequest, SamplingParams, ServiceClass

RT = SloTerms(rt=True, ttft_slo_s=0.4, tpot_slo_s=0.2)


@pytest.mark.parametrize(
    ("last_token_s", "expected"),
    [(None, 10.4), (12.0, 12.2)],
    ids=["before-first-token-ttft", "after-first-token-tpot"],
)
def test_next_token_deadline(last_token_s: float | None, expected: float) -> None:
    assert next_token_deadline(RT, 10.0, last_token_s) == pytest.approx(expected)


def test_priorities_order_rt_by_deadline_then_be_by_caller_priority() -> None:
    epoch = 100.0
    urgent = bros_priority(RT, 100.25, epoch)
    relaxed = bros_priority(RT, 101.0, epoch)
    no_slo = bros_priority(SloTerms(rt=True), math.inf, epoch)
    be_first = bros_priority(SloTerms(rt=False, base_priority=0), 100.0, epoch)
    be_later = bros_priority(SloTerms(rt=False, base_priority=5), 100.0, epoch)

    assert (urgent, relaxed) == (250, 1000)
    assert urgent < relaxed < no_slo < be_first < be_later
    assert be_first == BE_PRIORITY_BASE


def test_extra_args_round_trip() -> None:
    request = GenerationRequest("r", (1,), 4, ServiceClass.RT, priority=3, ttft_slo_s=0.4, tpot_slo_s=0.2)
    assert read_terms(slo_extra_args(request), 3) == SloTerms(True, 0.4, 0.2, 3)
    assert read_terms(None, 7) == SloTerms(False, 0.0, 0.0, 7)


async def _rt_behind_full_be_batch(scheduler_cls: type | None) -> tuple[list[str], float]:
    """Two of four long BE requests running in a 2-sequence engine, then one short RT request.

    Returns the order of first tokens and completions, and the RT request's TTFT.
    """
    backend = VllmEngineBackend(
        VllmEngineOptions(kv_cache_gib=0.5, max_num_seqs=2, scheduler_cls=scheduler_cls)
    )
    await backend.start()
    events: list[str] = []
    rt_ttft = 0.0

    async def run(request: GenerationRequest) -> None:
        nonlocal rt_ttft
        async for chunk in backend.generate(request):
            if chunk.token_ids and f"first:{request.request_id}" not in events:
                events.append(f"first:{request.request_id}")
            if chunk.usage is not None and request.service_class == ServiceClass.RT:
                rt_ttft = chunk.usage.ttft_s
        events.append(f"done:{request.request_id}")

    try:
        long_be = SamplingParams(temperature=0.0, ignore_eos=True)
        prompt = tuple(range(1000, 1064))
        be_tasks = [
            asyncio.create_task(run(GenerationRequest(f"be{i}", prompt[i:], 96, sampling=long_be)))
            for i in range(4)
        ]
        while not {"first:be0", "first:be1"} <= set(events):
            await asyncio.sleep(0.01)
        # priority -1 beats the BE requests' 0 under vLLM's own priority scheduler too.
        await run(GenerationRequest(
            "rt", tuple(range(2000, 2040)), 4, ServiceClass.RT, priority=-1,
            ttft_slo_s=0.05, tpot_slo_s=0.2, sampling=SamplingParams(temperature=0.0, ignore_eos=True),
        ))
        await asyncio.gather(*be_tasks)
    finally:
        await backend.stop()
    print(f"\n{scheduler_cls.__name__ if scheduler_cls else 'vLLM priority scheduler'}: "
          f"RT TTFT {rt_ttft * 1000:.0f} ms; order: {' '.join(events)}")
    return events, rt_ttft


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="session")
async def test_rt_request_preempts_be_work_in_a_full_batch() -> None:
    events, _ttft = await _rt_behind_full_be_batch(BrosVllmScheduler)

    assert events.index("done:rt") < events.index("done:be0")
    assert events.index("done:rt") < events.index("done:be1")
    assert events.index("first:rt") < events.index("first:be2")


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="session")
async def test_control_vllm_priority_scheduler_makes_rt_wait_for_a_free_slot() -> None:
    events, _ttft = await _rt_behind_full_be_batch(None)

    assert events.index("first:rt") > min(events.index("done:be0"), events.index("done:be1"))
