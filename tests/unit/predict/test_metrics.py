from __future__ import annotations

import numpy as np
import pytest
from forethought.predict import LengthBuckets, ResidualSpread
from forethought.predict.metrics import accuracy_report, fit_log_linear, macro_f1


def test_macro_f1_averages_per_class_f1() -> None:
    true = np.array([0, 0, 1, 1])
    predicted = np.array([0, 1, 1, 1])
    # class 0: tp=1, predicted=1, actual=2 -> 2/3; class 1: tp=2, predicted=3, actual=2 -> 4/5
    assert macro_f1(true, predicted, 2) == pytest.approx((2 / 3 + 4 / 5) / 2)


def test_perfect_predictions_score_one() -> None:
    lengths = np.array([5.0, 50.0, 100.0, 300.0, 500.0])
    estimates = np.log1p(lengths)
    buckets = LengthBuckets((10, 60, 200, 400))
    report = accuracy_report(lengths, estimates, buckets.index(lengths), buckets, ResidualSpread((0.0,)))
    assert (report.accuracy, report.macro_f1, report.kendall_tau) == pytest.approx((1.0, 1.0, 1.0))
    assert report.mae_tokens == pytest.approx(0.0)


def test_log_linear_fit_recovers_a_power_law() -> None:
    features = np.array([10.0, 100.0, 1000.0])
    lengths = np.expm1(1.0 + 0.5 * np.log1p(features))
    assert fit_log_linear(features, lengths) == pytest.approx((1.0, 0.5))
