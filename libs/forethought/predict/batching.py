"""Gathers concurrent predict calls into one model forward (SSJF section 4.2, "Predictor Overhead").

Each call waits at most ``max_wait_s`` for others to join its batch (or until ``max_batch`` prompts
are waiting); one batch runs at a time in a worker thread, so calls arriving meanwhile form the next.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from forethought.predict.history import (
    NO_HISTORY,
    ConversationHistory,
    validate_history,
    validated_histories,
)
from forethought.predict.length_forecast import (
    MAX_PROMPT_CHARS,
    LengthForecast,
    validate_prompt,
    validate_prompts,
)

# prompts, their histories and their served models ("" for the default) -> one forecast each
PredictBatch = Callable[[list[str], list[ConversationHistory], list[str]], list[LengthForecast]]
Waiting = tuple[str, ConversationHistory, str, "asyncio.Future[LengthForecast]"]


class BatchingPredictor:
    """Async front of a batch predict function (``Predictor.predict``)."""

    def __init__(
        self,
        predict_batch: PredictBatch,
        max_batch: int = 32,
        max_wait_s: float = 0.005,
        max_prompt_chars: int = MAX_PROMPT_CHARS,
        on_forward: Callable[[float, int], None] | None = None,
    ) -> None:
        """``on_forward(seconds, prompts)`` is told each successful forward's time and size (the service's latency metric)."""
        self._predict_batch = predict_batch
        self._on_forward = on_forward
        self._max_batch = max_batch
        self._max_wait_s = max_wait_s
        self._max_prompt_chars = max_prompt_chars
        self._waiting: list[Waiting] = []
        self._timer: asyncio.TimerHandle | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._one_forward_at_a_time = asyncio.Lock()

    async def predict(
        self, prompt: str, history: ConversationHistory = NO_HISTORY, field_name: str = "prompt", model: str = ""
    ) -> LengthForecast:
        """Forecast one prompt for its served ``model``, batched with concurrent calls (of any model).

        Raises:
            InvalidField: a bad prompt or history, at once, before joining a batch.
        """
        read = validate_prompt(prompt, field_name, self._max_prompt_chars)
        return await self._join(read, validate_history(history), model)

    async def predict_many(
        self, prompts: Sequence[str], histories: Sequence[ConversationHistory] | None = None, model: str = ""
    ) -> list[LengthForecast]:
        """Forecast several prompts for one served ``model``, each batched like ``predict``; ``histories``:
        none, or one per prompt.

        Raises:
            InvalidField: any bad prompt or history, before any of them joins a batch.
        """
        read = validate_prompts(prompts, self._max_prompt_chars)
        paired = validated_histories(histories, len(prompts))
        return list(await asyncio.gather(*(self._join(prompt, history, model) for prompt, history in zip(read, paired))))

    async def _join(self, prompt: str, history: ConversationHistory, model: str) -> LengthForecast:
        """Adds a validated prompt to the next batch and waits for its forecast."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[LengthForecast] = loop.create_future()
        self._waiting.append((prompt, history, model, future))
        if len(self._waiting) >= self._max_batch:
            self._dispatch()
        elif self._timer is None:
            self._timer = loop.call_later(self._max_wait_s, self._dispatch)
        return await future

    def _dispatch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._waiting = self._waiting[: self._max_batch], self._waiting[self._max_batch :]
        if batch:
            task = asyncio.get_running_loop().create_task(self._run(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        if self._waiting:
            self._timer = asyncio.get_running_loop().call_later(self._max_wait_s, self._dispatch)

    async def _run(self, batch: list[Waiting]) -> None:
        async with self._one_forward_at_a_time:
            started = time.perf_counter()
            try:
                forecasts = await asyncio.to_thread(
                    self._predict_batch, [prompt for prompt, _, _, _ in batch], [history for _, history, _, _ in batch],
                    [model for _, _, model, _ in batch],
                )
            except Exception as error:  # every caller of the batch gets the batch's error
                for _, _, _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                return
            if self._on_forward is not None:
                self._on_forward(time.perf_counter() - started, len(batch))
        for (_, _, _, future), forecast in zip(batch, forecasts):
            if not future.done():
                future.set_result(forecast)

    async def aclose(self) -> None:
        """Wait for batches in flight."""
        if self._waiting:
            self._dispatch()
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)
