"""A demand distribution cut into equal-width buckets (Hermes sections 3.2 and 3.3: demand is described
over 10 buckets, and ranks are refreshed once per bucket period)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from forethought.demand.refinement import BUCKETS, Bucketing
from forethought.domain import require


@dataclass(frozen=True)
class DiscreteDemand:
    """A distribution over ``values`` (seconds, ascending) with ``probabilities`` summing to 1."""

    values: tuple[float, ...]
    probabilities: tuple[float, ...]
    bucket_width_s: float


def discretize(samples: Sequence[float], buckets: int = BUCKETS) -> DiscreteDemand:
    """Equal-width buckets over the samples' range, each at the mean of its samples (so the mean is
    kept); empty buckets are left out."""
    require(len(samples) > 0, "samples", "must hold at least one sample")
    bucketing = Bucketing.of(samples, buckets)
    sums, counts = [0.0] * buckets, [0] * buckets
    for sample in samples:
        index = bucketing.index(sample)
        sums[index] += sample
        counts[index] += 1
    filled = [i for i in range(buckets) if counts[i]]
    return DiscreteDemand(
        values=tuple(sums[i] / counts[i] for i in filled),
        probabilities=tuple(counts[i] / len(samples) for i in filled),
        bucket_width_s=bucketing.width,
    )
