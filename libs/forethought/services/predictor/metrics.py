"""The predictor service's Prometheus metrics: how long forecasts take (SSJF section 4.2, predictor overhead)."""

from __future__ import annotations

from prometheus_client import Histogram

FORECAST_SECONDS = Histogram(
    "forethought_predictor_forecast_seconds",
    "forecast latency: scope=batch, one model forward over a batch; scope=prompt, a Predict call's prompt from "
    "arrival to its forecast (batching wait included)",
    ["scope"],
    buckets=(0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
BATCH_PROMPTS = Histogram(
    "forethought_predictor_batch_prompts", "prompts in one model forward", buckets=(1, 2, 4, 8, 16, 32, 64),
)


def observe_batch(seconds: float, prompts: int) -> None:
    FORECAST_SECONDS.labels(scope="batch").observe(seconds)
    BATCH_PROMPTS.observe(prompts)


def observe_prompts(seconds: float, prompts: int) -> None:
    prompt_histogram = FORECAST_SECONDS.labels(scope="prompt")
    for _ in range(prompts):
        prompt_histogram.observe(seconds)
