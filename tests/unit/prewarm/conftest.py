"""Small factories for prewarm tests: a settable clock and a fake engine that records its requests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest
from forethought.domain import (
    CacheEvent,
    EngineStats,
    FinishReason,
    GenerationChunk,
    GenerationRequest,
    Usage,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingEngine:
    """An EngineBackend that answers one token per request and remembers what it was asked."""

    def __init__(self, model: str = "m") -> None:
        self.model = model
        self.requests: list[GenerationRequest] = []
        self.started = 0
        self.stopped = 0

    async def start(self) -> None:
        self.started += 1

    async def stop(self) -> None:
        self.stopped += 1

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationChunk]:
        self.requests.append(request)
        usage = Usage(len(request.prompt_token_ids), 0, 1, 0.01)
        yield GenerationChunk(request.request_id, (7,), "x", FinishReason.LENGTH, usage)

    async def abort(self, request_id: str) -> bool:
        return False

    max_request_tokens = 4096
    vocabulary_size = None
    detokenizes = True
    runs_model = False

    def stats(self) -> EngineStats:
        return EngineStats()

    def failure(self) -> str | None:
        return None

    async def cache_events(self) -> AsyncIterator[Sequence[CacheEvent]]:
        return
        yield


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_engine() -> type[RecordingEngine]:
    return RecordingEngine
