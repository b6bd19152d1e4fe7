"""Online refinement: Pearson over 10 buckets, the paper's five correlations, and the records kept."""

from __future__ import annotations

import pytest
from forethought.demand import (
    Bucketing,
    Consumption,
    DemandVariable,
    Observation,
    RecordFilter,
    UnitExecution,
    bucketed_pearson,
    correlations,
)

INPUT, OUTPUT, PARALLELISM = DemandVariable.INPUT, DemandVariable.OUTPUT, DemandVariable.PARALLELISM


@pytest.mark.parametrize(
    ("value", "bucket"),
    [(0, 0), (9.99, 0), (10, 1), (55, 5), (99.9, 9), (100, 9), (-5, 0), (150, 9)],
)
def test_ten_equal_buckets_over_the_range(value: float, bucket: int) -> None:
    assert Bucketing(0, 100).index(value) == bucket


def test_a_range_of_one_value_is_one_bucket() -> None:
    assert Bucketing.of([7, 7, 7]).index(7) == 0
    assert Bucketing.of([]).index(3) == 0


@pytest.mark.parametrize(
    ("ys", "coefficient"),
    [
        (list(range(10)), 1.0),
        (list(range(9, -1, -1)), -1.0),
        ([5] * 10, 0.0),
        ([0, 0, 0, 0, 0, 9, 9, 9, 9, 9], pytest.approx(0.8703882797784892)),
    ],
    ids=["same", "reversed", "constant", "step"],
)
def test_bucketed_pearson(ys: list[float], coefficient: float) -> None:
    assert bucketed_pearson(list(range(10)), ys) == coefficient


def test_pearson_reads_buckets_not_raw_values() -> None:
    # 1 and 2 share bucket 0 of [1, 100], so their swapped order is invisible: the buckets agree exactly.
    assert bucketed_pearson([1, 2, 100], [2, 1, 100]) == pytest.approx(1.0)
    assert bucketed_pearson([1, 2], [2, 1], buckets=1) == 0.0


def test_unpaired_values_are_refused() -> None:
    with pytest.raises(ValueError, match="pair up"):
        bucketed_pearson([1, 2], [1])


def after_aggregate(upstream_output: int, input_tokens: int, output_tokens: int = 50) -> Observation:
    """A scoring record whose run reached it from an aggregate step that wrote ``upstream_output`` tokens."""
    upstream = UnitExecution("aggregate", Consumption(input_tokens=400, output_tokens=upstream_output))
    return Observation(Consumption(input_tokens, output_tokens), upstream)


# The scoring unit's prompt holds the aggregate's output plus a fixed 300-token instruction (Hermes 3.2, DM).
SCORING = [after_aggregate(out, out + 300) for out in range(10, 101, 10)]


def test_the_five_correlations_of_a_scoring_unit() -> None:
    found = {(c.target, c.source, c.from_upstream): c.coefficient for c in correlations(SCORING, "aggregate")}
    assert found == {
        (INPUT, INPUT, True): 0.0,
        (INPUT, OUTPUT, True): pytest.approx(1.0),
        (OUTPUT, OUTPUT, True): 0.0,
        (OUTPUT, INPUT, False): 0.0,
        (PARALLELISM, PARALLELISM, True): 0.0,
    }


def test_records_after_another_unit_are_not_joined() -> None:
    assert all(c.coefficient == 0.0 for c in correlations(SCORING, "merge") if c.from_upstream)


def test_the_filter_keeps_records_in_the_upstream_bucket() -> None:
    refined = RecordFilter(SCORING, "aggregate")
    assert (refined.upstream_sources, refined.uses_own_input, refined.refines) == ([OUTPUT], False, True)
    # Upstream outputs 10..100 cut into buckets of 9 tokens: 55 lands with 60 (record 5).
    assert refined.candidates(Consumption(output_tokens=55)) == [5]
    assert refined.candidates(Consumption(output_tokens=10)) == [0]
    assert refined.candidates(Consumption(output_tokens=1000)) == [9]


def test_without_a_known_upstream_every_record_stays() -> None:
    assert RecordFilter(SCORING, "aggregate").candidates(None) == list(range(10))


def test_a_weak_correlation_is_not_used() -> None:
    shuffled = [after_aggregate(out, 300 + (out * 7) % 100) for out in range(10, 101, 10)]
    refined = RecordFilter(shuffled, "aggregate")
    assert abs(refined.correlations[1].coefficient) <= 0.5
    assert not refined.refines
    assert refined.candidates(Consumption(output_tokens=55)) == list(range(10))


def test_an_empty_bucket_falls_back_to_every_record() -> None:
    gapped = [after_aggregate(out, out + 300) for out in (10, 20, 30, 90, 100)]
    refined = RecordFilter(gapped, "aggregate")
    assert refined.candidates(Consumption(output_tokens=55)) == list(range(5))


def test_a_known_prompt_narrows_by_the_unit_own_input() -> None:
    # Generated code grows with the task's prompt (Hermes 3.2, CG): output follows input.
    records = [Observation(Consumption(input_tokens=i, output_tokens=2 * i)) for i in range(100, 1001, 100)]
    refined = RecordFilter(records, None)
    assert (refined.upstream_sources, refined.uses_own_input) == ([], True)
    assert refined.candidates(None, input_tokens=1000) == [9]
    assert refined.candidates(None, input_tokens=120) == [0]
    assert refined.candidates(None) == list(range(10))


def test_a_higher_threshold_turns_refinement_off() -> None:
    assert not RecordFilter(SCORING, "aggregate", threshold=1.0).refines
