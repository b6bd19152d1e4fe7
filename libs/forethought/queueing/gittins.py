"""The Gittins index of a discrete size distribution (Hermes section 3.3, Eq. 1).

    G(D, a) = inf_{Δ>0}  E[min(X - a, Δ) | X > a]  /  P(X - a <= Δ | X > a)

For a discrete distribution the infimum is reached at one of the support points above ``a``, so the
index is a minimum over at most ``len(values)`` candidates, computed in one sorted sweep.
"""

from __future__ import annotations

from collections.abc import Sequence


def gittins_index(
    values: Sequence[float], probabilities: Sequence[float] | None = None, attained: float = 0.0
) -> float:
    """Gittins rank of a job whose size is ``values`` (with ``probabilities``) after ``attained`` service.

    Lower ranks run first. Equal probabilities are assumed when ``probabilities`` is None, which is
    how predictor quantiles (p10..p90, each an equal slice of probability mass) are read.

    Raises:
        ValueError: no support point lies above ``attained`` (the job cannot still be running), or the
            inputs have different lengths.
    """
    weights = [1.0] * len(values) if probabilities is None else list(probabilities)
    if len(weights) != len(values):
        raise ValueError("values and probabilities must have the same length")
    support = sorted((v, w) for v, w in zip(values, weights, strict=True) if v > attained and w > 0)
    if not support:
        raise ValueError(f"no support point above attained={attained}")
    total = sum(w for _, w in support)
    best = float("inf")
    finished_mass = 0.0  # P(X - a <= Δ) for the Δ under consideration, unnormalised
    finished_work = 0.0  # E[(X - a); X - a <= Δ], unnormalised
    for value, weight in support:
        budget = value - attained
        finished_mass += weight
        finished_work += weight * budget
        # Jobs larger than the budget consume exactly the budget.
        expected_cost = finished_work + (total - finished_mass) * budget
        best = min(best, expected_cost / finished_mass)
    return best
