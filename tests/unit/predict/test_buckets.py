from __future__ import annotations

import numpy as np
import pytest
from forethought.predict import LengthBuckets, ResidualSpread


def test_edges_are_training_quintiles() -> None:
    buckets = LengthBuckets.from_lengths(list(range(1, 101)))
    assert buckets.edges == pytest.approx((20.8, 40.6, 60.4, 80.2))
    assert buckets.count == 5


@pytest.mark.parametrize(
    ("length", "bucket"), [(0, 0), (10, 0), (20, 1), (29.9, 1), (30, 2), (39, 2), (40, 3), (50, 4), (900, 4)]
)
def test_bucket_index_is_left_closed(length: float, bucket: int) -> None:
    assert LengthBuckets((20, 30, 40, 50)).index([length]).tolist() == [bucket]


def test_quantiles_shift_the_estimate_by_residual_quantiles() -> None:
    spread = ResidualSpread.from_pairs([np.e - 1] * 3, [1.0, 1.0, 1.0])
    assert spread.residuals == (0.0, 0.0, 0.0)
    quantiles = spread.quantiles(np.log1p(np.array([99.0])))
    assert quantiles[0] == pytest.approx([99.0] * 5)


def test_quantiles_are_monotone_and_histograms_sum_to_one() -> None:
    rng = np.random.default_rng(0)
    spread = ResidualSpread(tuple(rng.normal(0, 0.8, 500)))
    estimates = np.log1p(np.array([5.0, 50.0, 400.0]))
    quantiles = spread.quantiles(estimates)
    assert np.all(np.diff(quantiles, axis=1) >= 0)
    histograms = spread.histograms(estimates, LengthBuckets((20, 60, 120, 250)))
    assert histograms.sum(axis=1) == pytest.approx([1.0, 1.0, 1.0])
    assert histograms[0].argmax() == 0 and histograms[2].argmax() == 4
