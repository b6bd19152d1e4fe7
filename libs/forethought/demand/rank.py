"""Application ranks from a demand estimate (Hermes section 3.3): Gittins (Eq. 1) and least slack (Eq. 2).

Eq. 1, over the demand distribution D of an application that has received ``a`` of service::

    G(D, a) = inf_{Δ>0}  E[min(X_D - a, Δ) | X_D > a]  /  P(X_D - a <= Δ | X_D > a)

D is the estimate's samples cut into 10 equal-width buckets (each bucket's point is the mean of its
samples, so the mean is kept), and the index is ``forethought.queueing.gittins_index`` over it. The
paper refreshes a rank once per bucket period (``DiscreteDemand.bucket_width_s``); the distribution is
built once per estimate, so a refresh is one sweep over at most 10 points.

Eq. 2, for an application with a deadline, the worst-case slack::

    S(D, a) = t_ddl - t_now - (sup X_D - a)

Both rank lowest first. Samples run from the start of the current unit, so ``a`` is the service that
unit has received. When the unit has outrun every sample, its own rest is taken as zero and the ranks
are those of the units after it.
"""

from __future__ import annotations

from forethought.demand.estimate import DemandEstimate
from forethought.domain import require
from forethought.queueing import gittins_index


def gittins_rank(estimate: DemandEstimate, attained_s: float) -> float:
    """Eq. 1 for an application whose current unit has had ``attained_s`` of service; 0 when nothing
    is left to run."""
    require(attained_s >= 0, "attained_s", "must be >= 0")
    if estimate.total.values[-1] > attained_s:
        return gittins_index(estimate.total.values, estimate.total.probabilities, attained_s)
    if estimate.downstream.values[-1] > 0:
        return gittins_index(estimate.downstream.values, estimate.downstream.probabilities)
    return 0.0


def least_slack(estimate: DemandEstimate, attained_s: float, deadline_s: float, now_s: float) -> float:
    """Eq. 2: seconds to spare before ``deadline_s`` if the worst sampled demand is still to come."""
    require(attained_s >= 0, "attained_s", "must be >= 0")
    worst_remaining = estimate.worst_s - attained_s if estimate.worst_s > attained_s else max(estimate.downstream_s)
    return deadline_s - now_s - worst_remaining
