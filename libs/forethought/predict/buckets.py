"""Length buckets and length distributions derived from a point estimate (SSJF section 3.1, 4.3).

Five buckets with edges at the training labels' 20/40/60/80th percentiles give the paper's 5-class
accuracy. A regression head yields one number; its spread comes from validation residuals in log space
(split-conformal): quantile q of the length is exp(log estimate + q-quantile of residuals).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

QUANTILE_PERCENTS = (10, 25, 50, 75, 90)


@dataclass(frozen=True)
class LengthBuckets:
    """``edges``: the inner edges (n-1 of them for n buckets), ascending, in tokens."""

    edges: tuple[float, ...]

    @classmethod
    def from_lengths(cls, lengths: Sequence[float], count: int = 5) -> LengthBuckets:
        percents = np.linspace(0, 100, count + 1)[1:-1]
        return cls(tuple(float(edge) for edge in np.percentile(np.asarray(lengths, float), percents)))

    @property
    def count(self) -> int:
        return len(self.edges) + 1

    def index(self, lengths: np.ndarray | Sequence[float]) -> np.ndarray:
        """Bucket of each length: bucket k holds edges[k-1] <= length < edges[k]."""
        return np.searchsorted(np.asarray(self.edges), np.asarray(lengths, float), side="right")


@dataclass(frozen=True)
class ResidualSpread:
    """Validation residuals ``log1p(true) - log1p(estimate)``, sorted."""

    residuals: tuple[float, ...]

    @classmethod
    def from_pairs(cls, true_lengths: Sequence[float], log_estimates: Sequence[float]) -> ResidualSpread:
        residuals = np.log1p(np.asarray(true_lengths, float)) - np.asarray(log_estimates, float)
        return cls(tuple(float(value) for value in np.sort(residuals)))

    def quantiles(self, log_estimates: np.ndarray) -> np.ndarray:
        """Length quantiles (rows: estimates, columns: ``QUANTILE_PERCENTS``), monotone in each row."""
        shifts = np.quantile(np.asarray(self.residuals), np.asarray(QUANTILE_PERCENTS) / 100.0)
        return np.maximum(np.expm1(log_estimates[:, None] + shifts[None, :]), 0.0)

    def histograms(self, log_estimates: np.ndarray, buckets: LengthBuckets) -> np.ndarray:
        """Probability of each bucket (rows sum to 1): share of residual-shifted estimates in it."""
        shifted = np.expm1(log_estimates[:, None] + np.asarray(self.residuals)[None, :])
        index = buckets.index(shifted.ravel()).reshape(shifted.shape)
        counts = np.stack([(index == bucket).sum(axis=1) for bucket in range(buckets.count)], axis=1)
        return counts / max(len(self.residuals), 1)
