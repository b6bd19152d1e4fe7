"""Gittins rank (Eq. 1) over the discretized remaining demand, and worst-case slack (Eq. 2)."""

from __future__ import annotations

import pytest
from forethought.demand import DemandEstimate, discretize, gittins_rank, least_slack
from forethought.domain import InvalidField
from forethought.queueing import gittins_index
from hypothesis import given
from hypothesis import strategies as st


def single_unit(*totals: float) -> DemandEstimate:
    """An application with one unit left: the current unit's demand is all of it."""
    return DemandEstimate(current_s=totals, total_s=totals)


def test_discretize_keeps_each_bucket_mean_and_share() -> None:
    demand = discretize([1.0, 2.0, 3.0, 4.0], buckets=2)
    assert (demand.values, demand.probabilities, demand.bucket_width_s) == ((1.5, 3.5), (0.5, 0.5), 1.5)


def test_discretize_leaves_out_empty_buckets() -> None:
    demand = discretize([0.0, 0.0, 0.0, 10.0])
    assert (demand.values, demand.probabilities, demand.bucket_width_s) == ((0.0, 10.0), (0.75, 0.25), 1.0)
    assert discretize([5.0, 5.0]).values == (5.0,)
    with pytest.raises(InvalidField, match="samples: must hold at least one sample"):
        discretize([])


def test_rank_of_a_two_point_demand() -> None:
    # Eq. 1 with Δ = 1: E[min(X, 1)] / P(X <= 1) = 1 / 0.5 = 2, below E[X] / 1 = 5.5 at Δ = 10.
    assert gittins_rank(single_unit(1.0, 10.0), attained_s=0.0) == pytest.approx(2.0)


def test_rank_moves_with_attained_service() -> None:
    # After 2 s the short outcome is ruled out; 8 s remain for certain.
    assert gittins_rank(single_unit(1.0, 10.0), attained_s=2.0) == pytest.approx(8.0)


def test_gittins_orders_differently_from_the_mean() -> None:
    # Hermes Fig. 7: a likely-short application goes first although its mean is longer.
    steady, gamble = single_unit(5.0, 5.0), single_unit(1.0, 20.0)
    assert (steady.mean_s, gamble.mean_s) == (5.0, 10.5)
    assert gittins_rank(gamble, 0.0) < gittins_rank(steady, 0.0)


def test_rank_is_the_queueing_index_over_the_discretized_samples() -> None:
    samples = single_unit(*(float(x) for x in range(1, 101)))
    demand = discretize(samples.total_s)
    assert samples.total == demand
    assert gittins_rank(samples, 30.0) == gittins_index(demand.values, demand.probabilities, attained=30.0)


def test_the_distribution_is_built_once_per_estimate() -> None:
    samples = single_unit(1.0, 10.0)
    gittins_rank(samples, 0.0)
    assert samples.total is samples.total
    assert samples.total.bucket_width_s == pytest.approx(0.9)


def test_an_overrun_unit_is_ranked_by_what_follows_it() -> None:
    estimate = DemandEstimate(current_s=(3.0, 3.0), total_s=(3.0, 7.0))
    assert gittins_rank(estimate, attained_s=5.0) == pytest.approx(2.0)
    assert gittins_rank(estimate, attained_s=8.0) == pytest.approx(4.0)
    assert gittins_rank(single_unit(3.0), attained_s=8.0) == 0.0


def test_least_slack_is_the_deadline_less_the_worst_remaining_demand() -> None:
    estimate = DemandEstimate(current_s=(1.0, 2.0), total_s=(3.0, 7.0))
    assert least_slack(estimate, attained_s=1.0, deadline_s=20.0, now_s=10.0) == pytest.approx(4.0)
    assert least_slack(estimate, attained_s=0.0, deadline_s=12.0, now_s=10.0) == pytest.approx(-5.0)
    # Past every sample: the worst of what follows the current unit (7 - 2 = 5 s) remains.
    assert least_slack(estimate, attained_s=9.0, deadline_s=20.0, now_s=10.0) == pytest.approx(5.0)


def test_attained_service_cannot_be_negative() -> None:
    with pytest.raises(InvalidField, match="attained_s: must be >= 0"):
        gittins_rank(single_unit(1.0), -1.0)


@given(
    st.lists(st.floats(min_value=0.01, max_value=1e4, allow_nan=False), min_size=1, max_size=60),
    st.floats(min_value=0, max_value=1e4, allow_nan=False),
)
def test_the_rank_lies_between_the_shortest_and_the_mean_remaining_demand(totals: list[float], attained: float) -> None:
    # Eq. 1 at the largest budget is the mean; at any budget the ratio is at least the smallest outcome.
    estimate = single_unit(*totals)
    demand = estimate.total if estimate.total.values[-1] > attained else estimate.downstream  # the rank's own test
    remaining = [(v - attained, p) for v, p in zip(demand.values, demand.probabilities) if v > attained]
    rank = gittins_rank(estimate, attained)
    if not remaining:
        assert rank == 0.0
        return
    mean = sum(v * p for v, p in remaining) / sum(p for _, p in remaining)
    assert min(v for v, _ in remaining) * (1 - 1e-9) <= rank <= mean * (1 + 1e-9)
