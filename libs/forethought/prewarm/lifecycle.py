"""LoadModel / UnloadModel for a worker: engines started and stopped by name (Hermes section 3.4).

Loading a model is the slowest cold start a worker has (tens of seconds for vLLM), which is why the
prewarm agent can ask for it ahead of the request. Any ``EngineBackend`` factory works: a
``VllmEngineBackend`` in production, the native engine or a fake in tests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from forethought.backends.protocol import EngineBackend

EngineFactory = Callable[[str], EngineBackend]


class ModelLifecycle:
    """The worker's loaded engines by model name, with measured load times."""

    def __init__(self, factory: EngineFactory, clock: Callable[[], float] = time.monotonic) -> None:
        self._factory = factory
        self._clock = clock
        self._engines: dict[str, EngineBackend] = {}
        self._loading: dict[str, asyncio.Task[EngineBackend]] = {}
        self.load_seconds: dict[str, float] = {}
        """Seconds the last load of each model took (start to accepting requests)."""

    async def load(self, model: str) -> float:
        """Starts the model's engine unless it runs already; returns the seconds this call waited."""
        started = self._clock()
        if model in self._engines:
            return 0.0
        # Concurrent loads of one model share one start, which goes on when a caller gives up waiting.
        task = self._loading.get(model)
        if task is None:
            task = asyncio.create_task(self._start(model), name=f"load-{model}")
            self._loading[model] = task
            task.add_done_callback(lambda done: self._loaded(model, done))
        await asyncio.shield(task)
        return self._clock() - started

    def _loaded(self, model: str, task: asyncio.Task[EngineBackend]) -> None:
        """A start ended, whether or not a caller still waits on it: the next load starts afresh."""
        if self._loading.get(model) is task:
            del self._loading[model]
        if not task.cancelled():
            task.exception()  # retrieved, so a failure no caller waited for is not logged as lost; the next load retries

    async def _start(self, model: str) -> EngineBackend:
        started = self._clock()
        engine = self._factory(model)
        await engine.start()
        self._engines[model] = engine
        self.load_seconds[model] = self._clock() - started
        return engine

    async def unload(self, model: str) -> bool:
        """Stops the model's engine, once its start in progress (if any) has ended; False when it was not loaded."""
        loading = self._loading.get(model)
        if loading is not None:
            await asyncio.gather(asyncio.shield(loading), return_exceptions=True)
        engine = self._engines.pop(model, None)
        if engine is None:
            return False
        await engine.stop()
        return True

    def engine(self, model: str) -> EngineBackend | None:
        """The running engine of ``model``, or None."""
        return self._engines.get(model)

    def loaded(self) -> list[str]:
        return list(self._engines)

    def holds(self, model: str) -> bool:
        """The model's engine runs or is starting."""
        return model in self._engines or model in self._loading

    async def stop_all(self) -> None:
        for model in list(self._engines):
            await self.unload(model)
