"""Monte Carlo demand: exact on fixed graphs, the right mean on branches and loops, the same per seed."""

from __future__ import annotations

import random

import pytest
from forethought.demand import (
    Consumption,
    DemandEstimate,
    DemandEstimator,
    PDGraph,
    PerTokenSeconds,
    RunPosition,
    UnitExecution,
)
from forethought.domain import InvalidField

from .conftest import LLM, SANDBOX, llm_step, make_unit, tool_step

# 1 ms a prompt token, 10 ms an output token: 100 in + 10 out is 0.2 s per request.
PER_TOKEN = PerTokenSeconds(prefill_s=0.001, decode_s=0.01)


def chain() -> PDGraph:
    graph = PDGraph("chain", [make_unit("draft", {"check": 1.0}), make_unit("check", backend=SANDBOX)])
    graph.record([llm_step("draft", 100, 10, parallelism=2), tool_step("check", 2.0)])
    return graph


def estimate(graph: PDGraph, position: RunPosition, walks: int = 200, seed: int = 7, **options: object) -> DemandEstimate:
    return DemandEstimator(graph, PER_TOKEN, walks=walks, **options).estimate(position, random.Random(seed))


def test_per_token_seconds_counts_every_parallel_request() -> None:
    assert PER_TOKEN(LLM, Consumption(100, 10, parallelism=3)) == pytest.approx(0.6)


def test_a_fixed_chain_has_one_demand() -> None:
    from_draft = estimate(chain(), RunPosition("draft"))
    assert from_draft.current_s == pytest.approx([0.4] * 200)
    assert from_draft.total_s == pytest.approx([2.4] * 200)
    from_check = estimate(chain(), RunPosition("check", upstream=llm_step("draft")))
    assert (set(from_check.current_s), from_check.mean_s, from_check.worst_s) == ({2.0}, 2.0, 2.0)


def test_a_forecast_output_length_replaces_the_sampled_one_for_the_current_llm_unit() -> None:
    # Two parallel requests of 100 prompt tokens: 0.1 s of prefill each, plus 10 ms per forecast output token.
    forecast = estimate(chain(), RunPosition("draft", output_tokens=50))
    assert forecast.current_s == pytest.approx([2 * (0.1 + 0.5)] * 200)
    assert forecast.total_s == pytest.approx([1.2 + 2.0] * 200)
    # A tool unit has no output length: the forecast leaves its recorded duration.
    assert set(estimate(chain(), RunPosition("check", output_tokens=50)).current_s) == {2.0}


def react_loop() -> PDGraph:
    """reason (a 1 s tool here, so lengths do not matter) loops back with observed probability 1/3."""
    graph = PDGraph("react", [make_unit("reason", {"reason": 0.5, "end": 0.5}, SANDBOX)])
    graph.record([tool_step("reason", 1.0)])
    graph.record([tool_step("reason", 1.0), tool_step("reason", 1.0)])
    return graph


def test_a_loop_costs_its_expected_number_of_visits() -> None:
    result = estimate(react_loop(), RunPosition("reason"), walks=20_000)
    assert result.mean_s == pytest.approx(1 / (1 - 1 / 3), rel=0.03)
    assert set(result.current_s) == {1.0}
    assert all(total == int(total) for total in result.total_s)


def test_a_test_loop_matches_its_expected_demand() -> None:
    # write 1 s -> test 2 s -> end, or fix 3 s -> test again (tools here, so seconds are recorded).
    graph = PDGraph(
        "code_generation",
        [
            make_unit("write", {"test": 1.0}, SANDBOX),
            make_unit("test", {"end": 0.5, "fix": 0.5}, SANDBOX),
            make_unit("fix", {"test": 1.0}, SANDBOX),
        ],
    )
    graph.record([tool_step("write", 1.0), tool_step("test", 2.0)])
    graph.record([tool_step("write", 1.0), tool_step("test", 2.0), tool_step("fix", 3.0), tool_step("test", 2.0)])
    graph.record([tool_step("write", 1.0), tool_step("test", 2.0)])
    assert graph.branch_probabilities("test") == {"end": 0.75, "fix": 0.25}
    # With the observed 1/4 loop: E[test] = 2 + (3 + E[test]) / 4, so E[test] = 11 / 3 and E[write] = 14 / 3.
    assert estimate(graph, RunPosition("write"), walks=20_000).mean_s == pytest.approx(14 / 3, rel=0.02)


def test_branches_are_taken_at_their_observed_frequency() -> None:
    graph = PDGraph(
        "plan",
        [
            make_unit("plan", {"caption": 0.5, "video": 0.5}, SANDBOX),
            make_unit("caption", backend=SANDBOX),
            make_unit("video", backend=SANDBOX),
        ],
    )
    for _ in range(3):
        graph.record([tool_step("plan", 1.0), tool_step("caption", 2.0)])
    graph.record([tool_step("plan", 1.0), tool_step("video", 30.0)])
    result = estimate(graph, RunPosition("plan"), walks=20_000)
    assert set(result.total_s) == {3.0, 31.0}
    assert result.total_s.count(31.0) / 20_000 == pytest.approx(0.25, abs=0.015)


def test_the_same_seed_gives_the_same_samples() -> None:
    assert estimate(react_loop(), RunPosition("reason"), seed=3) == estimate(react_loop(), RunPosition("reason"), seed=3)
    assert estimate(react_loop(), RunPosition("reason"), seed=3) != estimate(react_loop(), RunPosition("reason"), seed=4)


def test_a_walk_stops_at_the_unit_limit() -> None:
    result = estimate(react_loop(), RunPosition("reason"), walks=2_000, max_walk_units=2)
    assert set(result.total_s) == {1.0, 2.0}


def scoring_after_aggregate() -> PDGraph:
    """aggregate -> score, the scoring prompt holding the aggregate's output (Hermes 3.2, DM)."""
    graph = PDGraph("merge", [make_unit("aggregate", {"score": 1.0}), make_unit("score")])
    for out in range(100, 1001, 100):
        graph.record([llm_step("aggregate", 400, out), llm_step("score", out + 300, 10)])
    return graph


def test_refinement_samples_the_records_matching_the_observed_upstream() -> None:
    position = RunPosition("score", upstream=llm_step("aggregate", 400, 1000))
    refined = estimate(scoring_after_aggregate(), position)
    assert refined.total_s == pytest.approx([1.3 + 0.1] * 200)
    plain = estimate(scoring_after_aggregate(), position, refine=False)
    assert len(set(plain.total_s)) == 10


def test_refinement_follows_the_sampled_upstream_down_the_walk() -> None:
    # From the aggregate, each walk's scoring record is the one joined to the aggregate record it drew.
    result = estimate(scoring_after_aggregate(), RunPosition("aggregate"))
    assert {round(t - c, 6) for c, t in zip(result.current_s, result.total_s)} <= {
        round((out + 300) * 0.001 + 0.1, 6) for out in range(100, 1001, 100)
    }
    assert all(
        round(t - c, 6) == round((c - 0.4) / 10 + 0.4, 6) for c, t in zip(result.current_s, result.total_s)
    )


def test_the_estimator_sees_runs_recorded_after_it_was_built() -> None:
    graph = chain()
    estimator = DemandEstimator(graph, PER_TOKEN, walks=50)
    assert set(estimator.estimate(RunPosition("check"), random.Random(0)).total_s) == {2.0}
    graph.record([llm_step("draft"), tool_step("check", 4.0)])
    assert set(estimator.estimate(RunPosition("check"), random.Random(0)).total_s) == {2.0, 4.0}


def test_unit_seconds_lists_the_current_unit_sorted() -> None:
    graph = scoring_after_aggregate()
    estimator = DemandEstimator(graph, PER_TOKEN)
    assert estimator.unit_seconds(RunPosition("aggregate")) == pytest.approx([0.4 + out * 0.01 for out in range(100, 1001, 100)])
    upstream = UnitExecution("aggregate", Consumption(400, 100))
    assert estimator.unit_seconds(RunPosition("score", upstream=upstream)) == pytest.approx([0.4 + 0.1])


def test_an_unknown_or_unprofiled_unit_is_named() -> None:
    graph = PDGraph("new", [make_unit("a", {"b": 1.0}), make_unit("b")])
    with pytest.raises(InvalidField, match="^position.unit: unknown unit 'c'"):
        estimate(graph, RunPosition("c"))
    with pytest.raises(InvalidField, match="^units.a: has no recorded execution to sample demand from$"):
        estimate(graph, RunPosition("a"))
    with pytest.raises(InvalidField, match="^position.upstream.unit: unknown unit 'z'"):
        estimate(chain(), RunPosition("check", upstream=llm_step("z")))
    with pytest.raises(InvalidField, match="^position.upstream.output_tokens: must be >= 0$"):
        estimate(chain(), RunPosition("check", upstream=llm_step("draft", output_tokens=-1)))
    with pytest.raises(InvalidField, match="^position.input_tokens: must be >= 0$"):
        estimate(chain(), RunPosition("draft", input_tokens=-1))


def test_remaining_demand_is_conditioned_on_the_attained_service() -> None:
    samples = DemandEstimate(current_s=(1.0, 2.0, 4.0), total_s=(3.0, 5.0, 4.0))
    assert samples.remaining_after(0.0) == [3.0, 5.0, 4.0]
    assert samples.remaining_after(3.5) == [1.5, 0.5]
    # Past every sample, the current unit is taken as done and what follows it remains.
    assert samples.remaining_after(6.0) == [2.0, 3.0, 0.0]
    with pytest.raises(InvalidField, match="attained_s: must be >= 0"):
        samples.remaining_after(-1.0)
