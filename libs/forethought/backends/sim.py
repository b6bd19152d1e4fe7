"""``SimEngineBackend``: the native engine core behind the ``EngineBackend`` interface, in real time.

The imperative shell around ``EngineCore`` (BROS section 3's engine loop): one asyncio task steps the core
while it has work and sleeps for each iteration's modelled duration divided by ``speedup``, then hands the
iteration's tokens to the streams and its cache events to the subscribers. Time inside the core is
modelled time: ``(loop time since start) * speedup``. A worker runs it where no accelerator exists, and
tests run it at a high ``speedup``. ``load_s`` makes ``start`` take that many real seconds, as a real
engine's load does (a vLLM engine takes tens of seconds), so a caller's handling of slow loads can be run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from forethought.backends.protocol import CacheEventFeed
from forethought.costmodel import CostModelExecutor, get_profile
from forethought.domain import (
    CacheEvent,
    EngineStats,
    FinishReason,
    GenerationChunk,
    GenerationRequest,
    Usage,
)
from forethought.engine.core import EngineConfig, EngineCore, StepOutput
from forethought.engine.tokens import TokenSource


class SimEngineBackend:
    """An ``EngineBackend`` whose iterations take the cost model's time."""

    detokenizes = False  # its tokens stand for text it never makes
    runs_model = False  # nor does a model score them

    def __init__(
        self,
        model: str,
        config: EngineConfig,
        profile: str,
        speedup: float = 1.0,
        token_source: TokenSource | None = None,
        load_s: float = 0.0,
    ) -> None:
        if speedup <= 0:
            raise ValueError("speedup must be positive")
        if load_s < 0:
            raise ValueError("load_s must not be negative")
        self.model = model
        self.speedup = speedup
        self.load_s = load_s
        self.core = EngineCore(config, CostModelExecutor(get_profile(profile)), token_source)
        self._streams: dict[str, asyncio.Queue[GenerationChunk]] = {}
        self._cache_events = CacheEventFeed()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._origin = 0.0

    async def start(self) -> None:
        if self._task is not None:
            return
        await asyncio.sleep(self.load_s)
        loop = asyncio.get_running_loop()
        self._origin = loop.time()
        self._wake = asyncio.Event()
        self._task = loop.create_task(self._run(), name=f"sim-engine-{self.model}")

    async def stop(self) -> None:
        for request_id in list(self._streams):
            await self.abort(request_id)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    @property
    def max_request_tokens(self) -> int:
        return self.core.config.total_slots  # the KV capacity: a longer request could never be scheduled

    @property
    def vocabulary_size(self) -> int | None:
        return None  # it models time, not text: token ids are opaque

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationChunk]:
        """Streams the request's tokens; closing or cancelling the stream aborts the request."""
        if self._wake is None:
            raise RuntimeError("SimEngineBackend.start() must be awaited before generate()")
        queue: asyncio.Queue[GenerationChunk] = asyncio.Queue()
        self.core.add_request(request, self._now())
        self._streams[request.request_id] = queue
        self._wake_loop()
        finished = False
        try:
            while not finished:
                chunk = await queue.get()
                finished = chunk.finish_reason is not None
                yield chunk
        finally:
            if not finished:
                self._streams.pop(request.request_id, None)
                self.core.abort(request.request_id, self._now())
                self._wake_loop()

    async def abort(self, request_id: str) -> bool:
        """Aborts the request; its stream ends with an ABORT chunk carrying the usage so far."""
        try:
            request = self.core.request(request_id)
        except KeyError:
            return False
        usage = Usage(
            prompt_tokens=request.num_prompt_tokens,
            cached_prompt_tokens=request.num_cached_prompt_tokens,
            output_tokens=request.num_output_tokens,
            ttft_s=(request.first_token_s - request.arrival_s) if request.first_token_s else 0.0,
        )
        self.core.abort(request_id, self._now())
        self._wake_loop()
        stream = self._streams.pop(request_id, None)
        if stream is not None:
            stream.put_nowait(GenerationChunk(request_id, (), finish_reason=FinishReason.ABORT, usage=usage))
        return True

    def failure(self) -> str | None:
        if self._task is None or not self._task.done():
            return None
        error = None if self._task.cancelled() else self._task.exception()
        return f"the engine loop ended: {type(error).__name__}: {error}" if error else "the engine loop ended"

    def stats(self) -> EngineStats:
        return self.core.stats()

    def cache_events(self) -> AsyncIterator[Sequence[CacheEvent]]:
        """Every batch of cache events produced after this subscription started, in order."""
        return self._cache_events.subscribe()

    # ---- the loop ------------------------------------------------------------------------------------

    def _wake_loop(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _now(self) -> float:
        if self._wake is None:
            return 0.0
        return (asyncio.get_running_loop().time() - self._origin) * self.speedup

    async def _run(self) -> None:
        assert self._wake is not None  # NOTE: created by start() before the task
        while True:
            if not self.core.has_work():
                self._wake.clear()
                await self._wake.wait()
                continue
            output = self.core.step(self._now())
            if output.duration_s == 0:
                # Nothing could run; only a new request or an abort changes that.
                self._wake.clear()
                await self._wake.wait()
                continue
            await asyncio.sleep(output.duration_s / self.speedup)
            self._deliver(output)

    def _deliver(self, output: StepOutput) -> None:
        for request_id, tokens in output.new_tokens.items():
            stream = self._streams.get(request_id)
            if stream is None:
                continue
            outcome = output.finished.get(request_id)
            if outcome is None:
                stream.put_nowait(GenerationChunk(request_id, tokens))
                continue
            del self._streams[request_id]
            stream.put_nowait(
                GenerationChunk(request_id, tokens, finish_reason=outcome.finish_reason, usage=outcome.usage)
            )
        if output.cache_events:
            self._cache_events.publish(output.cache_events)
