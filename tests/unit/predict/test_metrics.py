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


def test_pair_report_scores_each_answer_against_its_pairs_forecast() -> None:
    from forethought.predict.metrics import ceiling_report, pair_report

    sizes = [[10, 12], [100, 120], [1000, 900]]
    report = pair_report(np.array([11.0, 110.0, 950.0]), sizes, p90s=np.array([11.0, 200.0, 2000.0]))
    assert report.tau_pair_mean == pytest.approx(1.0)
    assert report.mae_tokens == pytest.approx((1 + 1 + 10 + 10 + 50 + 50) / 6)
    assert report.share_below_p90 == pytest.approx(5 / 6)  # 12 > 11
    assert (report.pairs, report.samples) == (3, 6)
    reversed_report = pair_report(np.array([950.0, 110.0, 11.0]), sizes)
    assert reversed_report.tau_samples < 0 < report.tau_samples
    ceiling = ceiling_report(sizes)
    assert ceiling.tau_pair_mean == pytest.approx(1.0) and np.isnan(ceiling.share_below_p90)


def test_ssjf_edges_put_a_quarter_of_answers_in_each_of_four_classes() -> None:
    from forethought.predict.metrics import pair_report

    rng = np.random.default_rng(0)
    sizes = [[int(length)] for length in rng.integers(1, 1000, 4000)]
    # a forecast at the true length scores 1; the median forecast scores about the share of its class
    exact = pair_report(np.array([row[0] for row in sizes], float), sizes)
    flat = pair_report(np.full(len(sizes), float(np.median([row[0] for row in sizes]))), sizes)
    assert exact.ssjf_accuracy == pytest.approx(1.0) and exact.quintile_accuracy == pytest.approx(1.0)
    assert flat.ssjf_accuracy == pytest.approx(0.25, abs=0.02) and flat.quintile_accuracy == pytest.approx(0.2, abs=0.02)
    # SSJF's tau ranks the class: a class exactly right still ties within each class, so tau-b is
    # sqrt(1 - sum of squared class shares) (shares ~0.25, 0.25, 0.25, 0.24, 0.01), not the length's 1
    assert exact.tau_samples == pytest.approx(1.0)
    assert exact.tau_ssjf_class == pytest.approx(np.sqrt(1 - 3 * 0.25**2 - 0.24**2 - 0.01**2), abs=0.01)
    assert flat.tau_ssjf_class == 0.0


def test_with_a_spread_the_class_forecast_is_the_most_probable_class() -> None:
    from forethought.predict.metrics import pair_report

    rng = np.random.default_rng(1)
    truth = rng.integers(1, 1000, 4000).astype(float)
    sizes = [[int(length)] for length in truth]
    # every answer is 4x (in log1p) its point forecast, and the spread says so
    points = np.expm1(np.log1p(truth) - np.log(4.0))
    spread = ResidualSpread((float(np.log(4.0)),))
    by_point, by_spread = pair_report(points, sizes), pair_report(points, sizes, spread=spread)
    # (rounding in expm1/log1p moves an answer sitting exactly on an edge now and then)
    assert by_spread.ssjf_accuracy > 0.99 and by_spread.quintile_accuracy > 0.99
    assert by_point.ssjf_accuracy < 0.6
    assert by_spread.tau_samples == by_point.tau_samples  # the point forecast's own ranking is unchanged
