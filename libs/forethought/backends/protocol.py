"""The one interface every worker engine implements (native sim engine, vLLM), and the cache-event feed.

The worker service is a thin shell over an ``EngineBackend``: it converts protobuf messages to the nouns of
``forethought.domain``, awaits the backend, and converts back. Cache events use the chained block hashes of
``forethought.domain.block_hashes`` whatever the engine, so the Redis prefix index has one shape.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

from forethought.domain import (
    CacheEvent,
    EngineStats,
    GenerationChunk,
    GenerationRequest,
)


class CacheEventFeed:
    """Hands each batch of cache events to every subscription open when it is published."""

    def __init__(self) -> None:
        self._subscribers: list[asyncio.Queue[Sequence[CacheEvent]]] = []

    @property
    def has_subscribers(self) -> bool:
        return bool(self._subscribers)

    def publish(self, batch: Sequence[CacheEvent]) -> None:
        for subscriber in self._subscribers:
            subscriber.put_nowait(batch)

    async def subscribe(self) -> AsyncIterator[Sequence[CacheEvent]]:
        """Every batch published after this subscription started, in order."""
        queue: asyncio.Queue[Sequence[CacheEvent]] = asyncio.Queue()
        self._subscribers.append(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._subscribers.remove(queue)


@runtime_checkable
class EngineBackend(Protocol):
    """What the worker service needs of an engine. Every method is safe to call concurrently."""

    model: str
    detokenizes: bool
    """True when its chunks carry text, so stop strings apply; False when it makes token ids only."""
    runs_model: bool
    """True when a model scores its tokens, so log probabilities and structured output apply."""

    @property
    def max_request_tokens(self) -> int:
        """The longest request it serves, prompt plus ``max_tokens``: the worker refuses longer ones up front."""

    @property
    def vocabulary_size(self) -> int | None:
        """Token ids run from 0 to this less one (the worker refuses others up front); None: any id is served."""

    async def start(self) -> None:
        """Loads the model; returns once the engine accepts requests."""

    async def stop(self) -> None:
        """Aborts what runs and frees the engine."""

    def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationChunk]:
        """Streams the request's output; cancelling the iterator aborts the request."""

    async def abort(self, request_id: str) -> bool:
        """Aborts a running request; False when it is unknown or already finished."""

    def stats(self) -> EngineStats:
        """The current load snapshot."""

    def failure(self) -> str | None:
        """Why the engine can no longer serve (its loop or its process died); None while it can."""

    def cache_events(self) -> AsyncIterator[Sequence[CacheEvent]]:
        """Batches of prefix-cache events, in the order the engine produced them."""
