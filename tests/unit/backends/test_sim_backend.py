"""SimEngineBackend: real-time streaming over the engine core, abort, load stats, cache events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from forethought.backends.protocol import EngineBackend
from forethought.backends.sim import SimEngineBackend
from forethought.domain import (
    BlockStored,
    FinishReason,
    GenerationRequest,
    ServiceClass,
)
from forethought.engine.core import EngineConfig


@pytest.fixture
async def backend() -> AsyncIterator[SimEngineBackend]:
    engine = SimEngineBackend("SmolLM2-135M", EngineConfig(num_blocks=256), "llama-7b-a100", speedup=20.0)
    await engine.start()
    yield engine
    await engine.stop()


def request(request_id: str, max_tokens: int = 6, prompt: tuple[int, ...] = tuple(range(40))) -> GenerationRequest:
    return GenerationRequest(request_id, prompt, max_tokens, ServiceClass.RT, ttft_slo_s=0.4, tpot_slo_s=0.2)


async def test_streams_tokens_and_ends_with_usage(backend: SimEngineBackend) -> None:
    assert isinstance(backend, EngineBackend)
    chunks = [chunk async for chunk in backend.generate(request("a"))]
    assert sum(len(c.token_ids) for c in chunks) == 6
    assert all(c.finish_reason is None for c in chunks[:-1])
    assert chunks[-1].finish_reason == FinishReason.LENGTH
    assert chunks[-1].usage is not None and chunks[-1].usage.output_tokens == 6


async def test_abort_stops_a_request(backend: SimEngineBackend) -> None:
    stream = backend.generate(request("long", max_tokens=500))
    first = await stream.__anext__()
    assert first.token_ids
    assert await backend.abort("long")
    rest = [chunk async for chunk in stream]
    assert rest[-1].finish_reason == FinishReason.ABORT
    assert not backend.core.has_work() and not await backend.abort("long")


async def test_closing_the_stream_aborts_the_request(backend: SimEngineBackend) -> None:
    stream = backend.generate(request("closed", max_tokens=500))
    await stream.__anext__()
    await stream.aclose()
    assert not backend.core.has_work()


async def test_stats_reflect_load(backend: SimEngineBackend) -> None:
    streams = [backend.generate(request(f"r{i}", max_tokens=200, prompt=tuple(range(i, i + 300)))) for i in range(6)]
    firsts = await asyncio.gather(*(s.__anext__() for s in streams))
    assert all(c.token_ids for c in firsts)
    stats = backend.stats()
    assert stats.rt.running + stats.rt.waiting == 6
    assert stats.kv_cache_usage > 0 and stats.prefill_tokens_per_s > 0
    for s in streams:
        await s.aclose()
    assert backend.stats().rt.running == 0


async def test_cache_events_arrive(backend: SimEngineBackend) -> None:
    events = backend.cache_events()
    pending = asyncio.ensure_future(events.__anext__())
    await asyncio.sleep(0)
    [chunk async for chunk in backend.generate(request("cached", max_tokens=2, prompt=tuple(range(500, 548))))]
    batch = await asyncio.wait_for(pending, 5)
    assert any(isinstance(e, BlockStored) and len(e.block_hashes) == 3 for e in batch)
    await events.aclose()
