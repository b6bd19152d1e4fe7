"""Application ranks from a demand estimate (Hermes section 3.3): Gittins (Eq. 1) and least slack (Eq. 2).

Eq. 1, over the remaining-demand distribution D of an application that has received ``a`` of service::

    G(D, a) = inf_{Δ>0}  E[min(X_D - a, Δ) | X_D > a]  /  P(X_D - a <= Δ | X_D > a)

The samples are discretized into 10 equal-width buckets (each bucket's point is the mean of its samples,
so the mean is kept) and the index is ``forethought.queueing.gittins_index`` over that distribution.
The paper refreshes the rank once per bucket period; ``bucket_width_s`` is that period.

Eq. 2, for an application with a deadline, the worst-case slack::

    S(D, a) = t_ddl - t_now - (sup X_D - a)

Both rank lowest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from forethought.demand.estimate import DemandEstimate
from forethought.demand.refinement import BUCKETS, Bucketing
from forethought.domain import require
from forethought.queueing import gittins_index


@dataclass(frozen=True)
class DiscreteDemand:
    """A distribution over ``values`` (seconds, ascending) with ``probabilities`` summing to 1."""

    values: tuple[float, ...]
    probabilities: tuple[float, ...]
    bucket_width_s: float


def discretize(samples: Sequence[float], buckets: int = BUCKETS) -> DiscreteDemand:
    """Equal-width buckets over the samples' range; empty buckets are left out."""
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


def gittins_rank(estimate: DemandEstimate, attained_s: float, buckets: int = BUCKETS) -> float:
    """Eq. 1 for an application whose current unit has had ``attained_s`` of service; 0 when nothing
    remains (its last unit has outrun every sample)."""
    remaining = discretize(estimate.remaining_after(attained_s), buckets)
    if remaining.values[-1] <= 0:
        return 0.0
    return gittins_index(remaining.values, remaining.probabilities)


def least_slack(estimate: DemandEstimate, attained_s: float, deadline_s: float, now_s: float) -> float:
    """Eq. 2: seconds to spare before ``deadline_s`` if the worst sampled demand is still to come."""
    return deadline_s - now_s - max(estimate.remaining_after(attained_s))
