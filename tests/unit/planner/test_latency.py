"""Eq. 1, 2 and 5: iteration FLOPs, the per-B linear latency executor, and fitting it from measured rows."""

from __future__ import annotations

import random

import pytest
from forethought.engine.executor import BatchShape, Executor, IterationEstimator
from forethought.planner import (
    LatencyCoefficients,
    LinearLatencyExecutor,
    LinearTerms,
    fit_latency_coefficients,
    iteration_flops,
)
from forethought.planner.latency import DECODE, PREFILL, iteration_features

from .conftest import make_model

MODEL = make_model("m")  # 32 layers, h = 4096, c = 6.74e9 / 32
C = 6.74e9 / 32


def test_prefill_flops_follow_eq_1() -> None:
    shape = BatchShape(prefill_tokens=20, prefill_requests=2)  # B = 2, s = 10
    assert iteration_flops(shape, MODEL) == pytest.approx(32 * (C * 2 * 10 + 2 * 2 * 4096 * 10**2))
    assert iteration_flops(shape, MODEL, tp=2) == pytest.approx(iteration_flops(shape, MODEL) / 2)


def test_decode_flops_follow_eq_2() -> None:
    shape = BatchShape(decode_requests=3, decode_context_tokens=300)
    assert iteration_flops(shape, MODEL) == pytest.approx(32 * (C * 3 + 2 * 4096 * 300))


def test_features_name_the_phase_and_the_lengths() -> None:
    mixed = iteration_features(BatchShape(prefill_tokens=8, prefill_requests=1, decode_requests=2,
                                          decode_context_tokens=40), MODEL, 1)
    assert (mixed.phase, mixed.requests, mixed.total_tokens, mixed.padded_tokens) == (PREFILL, 3, 50.0, 50.0)
    decode = iteration_features(BatchShape(decode_requests=2, decode_context_tokens=40), MODEL, 1)
    assert (decode.phase, decode.requests, decode.total_tokens) == (DECODE, 2, 42.0)


TRUE = {
    PREFILL: {1: LinearTerms(2e-13, 1e-6, 2e-6, 0.010), 4: LinearTerms(3e-13, 2e-6, 1e-6, 0.020)},
    DECODE: {1: LinearTerms(1e-12, 0.0, 5e-6, 0.008), 4: LinearTerms(2e-12, 0.0, 6e-6, 0.012)},
}


def synthetic_rows(seed: int, count: int) -> list[tuple[BatchShape, float]]:
    rng, truth = random.Random(seed), LinearLatencyExecutor(MODEL, 1, LatencyCoefficients(TRUE))
    rows = []
    for _ in range(count):
        batch = rng.choice((1, 4))
        if rng.random() < 0.5:
            shape = BatchShape(prefill_tokens=batch * rng.randint(5, 500), prefill_requests=batch)
        else:
            shape = BatchShape(decode_requests=batch, decode_context_tokens=batch * rng.randint(10, 2000))
        rows.append((shape, truth.iteration_time(shape)))
    return rows


def test_fitting_recovers_the_times_of_synthetic_rows() -> None:
    fitted = LinearLatencyExecutor(MODEL, 1, fit_latency_coefficients(synthetic_rows(0, 200), MODEL, 1))
    for shape, seconds in synthetic_rows(1, 50):
        assert fitted.iteration_time(shape) == pytest.approx(seconds, rel=1e-6)
    assert sorted(fitted.coefficients.terms[PREFILL]) == [1, 4]


def test_a_batch_size_between_fitted_ones_blends_their_estimates() -> None:
    executor = LinearLatencyExecutor(MODEL, 1, LatencyCoefficients(TRUE))
    three = BatchShape(decode_requests=3, decode_context_tokens=600)
    features = iteration_features(three, MODEL, 1)
    low, high = TRUE[DECODE][1].seconds(features), TRUE[DECODE][4].seconds(features)
    assert executor.iteration_time(three) == pytest.approx(low / 3 + 2 * high / 3)
    eight = BatchShape(decode_requests=8, decode_context_tokens=800)
    assert executor.iteration_time(eight) == pytest.approx(TRUE[DECODE][4].seconds(iteration_features(eight, MODEL, 1)))
    assert executor.iteration_time(BatchShape()) == 0.0
    assert isinstance(executor, Executor) and isinstance(executor, IterationEstimator)


def test_fitting_needs_a_measured_iteration() -> None:
    with pytest.raises(ValueError, match="at least one"):
        fit_latency_coefficients([(BatchShape(), 1.0)], MODEL, 1)
