"""``NullEngineBackend``: an engine that answers at once, so a benchmark measures the mesh, not a model.

Preble section 5.4 measures the global scheduler on its own; to do the same through the services, the
worker needs an engine whose cost is nil. This one runs no model and keeps no clock: a request gets
``max_tokens`` token ids in one chunk, with its usage, as soon as it arrives. Its prefix cache is a
least-recently-used set of chained block hashes (``forethought.domain.block_hashes``), so it publishes the
cache events a real engine would and the Redis prefix index fills as in production.
"""

from __future__ import annotations

import asyncio
import sys
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence

from forethought.backends.protocol import CacheEventFeed
from forethought.domain import (
    BlockRemoved,
    BlockStored,
    CacheEvent,
    ClassLoad,
    EngineStats,
    FinishReason,
    GenerationChunk,
    GenerationRequest,
    ServiceClass,
    Usage,
)
from forethought.domain.block_hashes import ROOT_PARENT, chained_block_hashes

NULL_TOKEN = 0
"""The token id every output position holds."""


class NullEngineBackend:
    """An ``EngineBackend`` that finishes every request immediately, with an LRU prefix cache of ``num_blocks``."""

    detokenizes = False
    runs_model = False

    def __init__(self, model: str, num_blocks: int = 2048, block_size: int = 16) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be >= 1")
        self.model = model
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._cached: OrderedDict[int, None] = OrderedDict()  # block hash, least recently used first
        self._running: dict[str, ServiceClass] = {}  # request id -> class, while its stream is open
        self._cache_events = CacheEventFeed()
        self._pending: list[CacheEvent] = []

    @property
    def max_request_tokens(self) -> int:
        return sys.maxsize  # it runs no model: any length is served at once

    @property
    def vocabulary_size(self) -> int | None:
        return None  # it runs no model: token ids are opaque

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        self._running.clear()

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationChunk]:
        """One chunk of ``max_tokens`` tokens, finished by length, with the prompt's cached share."""
        self._running[request.request_id] = request.service_class
        try:
            cached_blocks = self._cache(request.prompt_token_ids)
            usage = Usage(len(request.prompt_token_ids), cached_blocks * self.block_size, request.max_tokens, 0.0)
            yield GenerationChunk(request.request_id, (NULL_TOKEN,) * request.max_tokens,
                                  finish_reason=FinishReason.LENGTH, usage=usage)
        finally:
            self._running.pop(request.request_id, None)

    async def abort(self, request_id: str) -> bool:
        """Requests finish as they arrive, so there is never one to abort."""
        return False

    def failure(self) -> str | None:
        return None

    def stats(self) -> EngineStats:
        rt = sum(1 for service_class in self._running.values() if service_class is ServiceClass.RT)
        return EngineStats(
            rt=ClassLoad(running=rt), be=ClassLoad(running=len(self._running) - rt),
            kv_cache_usage=len(self._cached) / self.num_blocks, total_kv_blocks=self.num_blocks,
            block_size=self.block_size,
        )

    def cache_events(self) -> AsyncIterator[Sequence[CacheEvent]]:
        """Every batch of cache events produced after this subscription started, in order."""
        return self._cache_events.subscribe()

    def _cache(self, prompt: Sequence[int]) -> int:
        """Stores the prompt's blocks (evicting the least recently used); returns the leading blocks it had."""
        hashes = chained_block_hashes(prompt, self.block_size)
        hit = 0
        while hit < len(hashes) and hashes[hit] in self._cached:
            self._cached.move_to_end(hashes[hit])
            hit += 1
        new = hashes[hit:]
        if new:
            for block in new:
                self._cached[block] = None
            parent = hashes[hit - 1] if hit else ROOT_PARENT
            tokens = tuple(prompt[hit * self.block_size : len(hashes) * self.block_size])
            events: list[CacheEvent] = [BlockStored(tuple(new), parent, tokens, self.block_size)]
            evicted = [self._cached.popitem(last=False)[0] for _ in range(len(self._cached) - self.num_blocks)]
            if evicted:
                events.append(BlockRemoved(tuple(evicted)))
            self._publish(events)
        return hit

    def _publish(self, events: list[CacheEvent]) -> None:
        """Queues events; everything produced in one loop iteration goes out as one batch."""
        if not self._cache_events.has_subscribers:
            return
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.extend(events)

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        self._cache_events.publish(batch)
