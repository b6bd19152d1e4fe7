from __future__ import annotations

import asyncio

import pytest
from forethought.domain import InvalidField
from forethought.predict import (
    NO_HISTORY,
    BatchingPredictor,
    ConversationHistory,
    LengthForecast,
    Predictor,
)


def constant_forecast(prompt: str) -> LengthForecast:
    return LengthForecast(mean=float(len(prompt)), quantiles={50: float(len(prompt))}, bucket=0, histogram=(1.0,))


class RecordingBatch:
    """Pure stand-in for Predictor.predict that records each batch it is given."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.histories: list[list[ConversationHistory]] = []
        self.models: list[list[str]] = []

    def __call__(self, prompts: list[str], histories: list[ConversationHistory], models: list[str]) -> list[LengthForecast]:
        self.batches.append(list(prompts))
        self.histories.append(list(histories))
        self.models.append(list(models))
        return [constant_forecast(prompt) for prompt in prompts]


async def test_concurrent_calls_share_one_forward(predictor: Predictor) -> None:
    batching = BatchingPredictor(predictor.predict, max_batch=32, max_wait_s=0.05)
    prompts = [f"Explain topic number {index} briefly." for index in range(10)]
    forecasts = await asyncio.gather(*(batching.predict(prompt) for prompt in prompts))
    assert predictor.forward_count == 1
    assert [f.mean for f in forecasts] == [f.mean for f in predictor.predict(prompts)]


async def test_a_full_batch_is_dispatched_without_waiting_and_the_rest_follows() -> None:
    recording = RecordingBatch()
    batching = BatchingPredictor(recording, max_batch=4, max_wait_s=0.01)
    results = await batching.predict_many([f"p{index}" for index in range(10)], [NO_HISTORY] * 10)
    assert [len(batch) for batch in recording.batches] == [4, 4, 2]
    assert [r.mean for r in results] == [2.0] * 10


async def test_each_forward_reports_its_time_and_size_and_a_failed_one_none() -> None:
    reported: list[tuple[float, int]] = []
    recording = RecordingBatch()
    batching = BatchingPredictor(recording, max_batch=4, max_wait_s=0.01, on_forward=lambda s, n: reported.append((s, n)))
    await batching.predict_many([f"p{index}" for index in range(6)])
    assert [size for _, size in reported] == [4, 2] and all(seconds > 0 for seconds, _ in reported)

    def failing(prompts: list[str], histories: list[ConversationHistory], models: list[str]) -> list[LengthForecast]:
        raise RuntimeError("backbone gone")

    broken = BatchingPredictor(failing, on_forward=lambda s, n: reported.append((s, n)))
    with pytest.raises(RuntimeError):
        await broken.predict("p")
    assert len(reported) == 2


async def test_invalid_prompt_fails_alone_before_batching() -> None:
    recording = RecordingBatch()
    batching = BatchingPredictor(recording)
    with pytest.raises(InvalidField) as error:
        await batching.predict_many(["fine", " \n"], [NO_HISTORY] * 2)
    assert error.value.field == "prompts[1]"
    assert recording.batches == []


async def test_a_prompt_past_the_limit_joins_the_batch_as_its_two_ends() -> None:
    recording = RecordingBatch()
    batching = BatchingPredictor(recording, max_prompt_chars=10, max_wait_s=0.01)
    await asyncio.gather(batching.predict("abcde" + "-" * 30 + "vwxyz"), batching.predict_many(["short", "0123456789ab"]))
    assert sorted(recording.batches[0]) == ["01234789ab", "abcdevwxyz", "short"]


async def test_each_prompt_reaches_the_model_with_its_own_history() -> None:
    recording = RecordingBatch()
    batching = BatchingPredictor(recording, max_batch=8, max_wait_s=0.01)
    histories = [ConversationHistory((index * 100,)) for index in range(3)]
    await batching.predict_many(["a", "b", "c"], histories)
    assert recording.batches == [["a", "b", "c"]] and recording.histories == [histories]


async def test_a_negative_history_length_fails_alone_before_batching() -> None:
    recording = RecordingBatch()
    batching = BatchingPredictor(recording)
    with pytest.raises(InvalidField) as error:
        await batching.predict_many(["a", "b"], [NO_HISTORY, ConversationHistory((5, -1))])
    assert (error.value.field, error.value.rule) == ("histories[1].earlier_answer_chars", "must be non-negative integers")
    assert recording.batches == []


async def test_a_failing_batch_fails_each_of_its_callers() -> None:
    def broken(prompts: list[str], histories: list[ConversationHistory], models: list[str]) -> list[LengthForecast]:
        raise RuntimeError("model crashed")

    batching = BatchingPredictor(broken, max_wait_s=0.001)
    outcomes = await asyncio.gather(batching.predict("a"), batching.predict("b"), return_exceptions=True)
    assert [str(outcome) for outcome in outcomes] == ["model crashed", "model crashed"]
    await batching.aclose()


async def test_calls_for_different_served_models_share_a_batch_each_with_its_model() -> None:
    recording = RecordingBatch()
    batching = BatchingPredictor(recording, max_batch=8, max_wait_s=0.01)
    await asyncio.gather(batching.predict("a", model="m1"), batching.predict_many(["b", "c"], model="m2"), batching.predict("d"))
    assert len(recording.batches) == 1
    assert sorted(zip(recording.batches[0], recording.models[0])) == [("a", "m1"), ("b", "m2"), ("c", "m2"), ("d", "")]
