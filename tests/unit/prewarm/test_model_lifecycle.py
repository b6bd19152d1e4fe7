"""Loading and unloading engines by name when callers give up or overlap: what the worker holds is what
``loaded`` says."""

from __future__ import annotations

import asyncio

from forethought.prewarm import ModelLifecycle

from tests.unit.prewarm.conftest import RecordingEngine


class SlowEngine(RecordingEngine):
    """Starts in 0.05 s, as a real engine takes its time."""

    async def start(self) -> None:
        await asyncio.sleep(0.05)
        await super().start()


async def test_a_load_whose_caller_gave_up_finishes_and_the_next_cycle_starts_a_new_engine() -> None:
    engines: list[SlowEngine] = []
    lifecycle = ModelLifecycle(lambda model: engines.append(SlowEngine(model)) or engines[-1])
    waiting = asyncio.ensure_future(lifecycle.load("big"))
    await asyncio.sleep(0.01)
    waiting.cancel()  # the LoadModel caller's deadline passed
    await asyncio.gather(waiting, return_exceptions=True)
    await asyncio.sleep(0.1)
    assert lifecycle.loaded() == ["big"]  # the start went on and is known
    assert await lifecycle.unload("big") and lifecycle.loaded() == []
    await lifecycle.load("big")
    assert len(engines) == 2 and lifecycle.engine("big") is engines[1] and engines[1].started == 1


async def test_an_unload_during_a_load_waits_for_it_and_leaves_nothing_running() -> None:
    engine = SlowEngine("big")
    lifecycle = ModelLifecycle(lambda model: engine)
    loading = asyncio.ensure_future(lifecycle.load("big"))
    await asyncio.sleep(0.01)
    assert await lifecycle.unload("big")
    await loading
    assert lifecycle.loaded() == [] and (engine.started, engine.stopped) == (1, 1)


async def test_a_failed_load_is_tried_again_by_the_next_one() -> None:
    attempts: list[int] = []

    class FailsFirst(RecordingEngine):
        async def start(self) -> None:
            attempts.append(1)
            if len(attempts) == 1:
                raise FileNotFoundError("no weights under 'big' yet")

    lifecycle = ModelLifecycle(lambda model: FailsFirst(model))
    waiting = asyncio.ensure_future(lifecycle.load("big"))
    await asyncio.gather(waiting, return_exceptions=True)
    assert isinstance(waiting.exception(), FileNotFoundError)
    await lifecycle.load("big")
    assert len(attempts) == 2 and lifecycle.loaded() == ["big"]
