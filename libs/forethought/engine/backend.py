"""The one interface every worker engine implements (native sim engine, vLLM).

The worker service is a thin shell over an ``EngineBackend``: it converts protobuf messages to these
dataclasses, awaits the backend, and converts back. Cache events use the chained block hashes of
``forethought.prefix.hashing`` whatever the engine, so the Redis prefix index has one shape.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


class ServiceClass(enum.IntEnum):
    """Request class (BROS section 3): real-time with SLOs, or best-effort throughput work."""

    RT = 1
    BE = 2


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False


@dataclass(frozen=True)
class GenerationRequest:
    """One request as an engine sees it.

    ``priority``: lower runs first (vLLM's convention); the scheduler maps class and rank onto it.
    ``ttft_slo_s`` / ``tpot_slo_s``: RT deadlines; 0 means none.
    """

    request_id: str
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    service_class: ServiceClass = ServiceClass.BE
    priority: int = 0
    ttft_slo_s: float = 0.0
    tpot_slo_s: float = 0.0
    sampling: SamplingParams = field(default_factory=SamplingParams)
    lora_name: str = ""


class FinishReason(enum.IntEnum):
    LENGTH = 1
    STOP = 2
    ABORT = 3
    ERROR = 4


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    cached_prompt_tokens: int
    output_tokens: int
    ttft_s: float


@dataclass(frozen=True)
class GenerationChunk:
    """Tokens produced since the previous chunk; the last chunk carries ``finish_reason`` and ``usage``.

    ``text`` comes from an engine that detokenizes (``EngineBackend.detokenizes``); it need not be the
    text of this chunk's tokens (vLLM holds text back while a stop string may match).
    """

    request_id: str
    token_ids: tuple[int, ...]
    text: str = ""
    finish_reason: FinishReason | None = None
    usage: Usage | None = None


@dataclass(frozen=True)
class BlockStored:
    """Blocks now cached, in prompt order; ``parent_hash`` is the block before the first one."""

    block_hashes: tuple[int, ...]
    parent_hash: int
    token_ids: tuple[int, ...]
    block_size: int


@dataclass(frozen=True)
class BlockRemoved:
    block_hashes: tuple[int, ...]


@dataclass(frozen=True)
class AllBlocksCleared:
    pass


CacheEvent = BlockStored | BlockRemoved | AllBlocksCleared


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


@dataclass(frozen=True)
class ClassLoad:
    running: int = 0
    waiting: int = 0


@dataclass(frozen=True)
class EngineStats:
    """A load snapshot: what E2's load cost and BROS's priorities need."""

    rt: ClassLoad = ClassLoad()
    be: ClassLoad = ClassLoad()
    kv_cache_usage: float = 0.0
    prefill_tokens_per_s: float = 0.0
    decode_tokens_per_s: float = 0.0
    mean_queueing_delay_s: float = 0.0
    prefix_hit_ratio: float = 0.0
    total_kv_blocks: int = 0
    block_size: int = 16


@runtime_checkable
class EngineBackend(Protocol):
    """What the worker service needs of an engine. Every method is safe to call concurrently."""

    model: str
    detokenizes: bool
    """True when its chunks carry text, so stop strings apply; False when it makes token ids only."""

    @property
    def max_request_tokens(self) -> int:
        """The longest request it serves, prompt plus ``max_tokens``: the worker refuses longer ones up front."""

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

    def cache_events(self) -> AsyncIterator[Sequence[CacheEvent]]:
        """Batches of prefix-cache events, in the order the engine produced them."""
