"""Eq. 3: prewarm a cold downstream backend when p_s * P(t_c > t_s + t_p) falls to K, never when p_s < K."""

from __future__ import annotations

import pytest
from forethought.demand import (
    BackendKind,
    BackendSpec,
    DemandEstimator,
    PDGraph,
    PerTokenSeconds,
    RunPosition,
    prewarm_decisions,
)
from forethought.domain import InvalidField
from hypothesis import given
from hypothesis import strategies as st

from .conftest import llm_step, make_unit, tool_step

VIT = BackendSpec(BackendKind.TOOL, tool="vit-captioning")
VIDEO = BackendSpec(BackendKind.TOOL, tool="text-to-video")
ONE_SECOND_A_TOKEN = PerTokenSeconds(prefill_s=0.0, decode_s=1.0)


def plan_and_execute() -> DemandEstimator:
    """plan runs 1..10 s (one record each); 8 of 10 runs then caption, 2 make a video."""
    graph = PDGraph(
        "plan_and_execute",
        [make_unit("plan", {"caption": 0.5, "video": 0.5}), make_unit("caption", backend=VIT), make_unit("video", backend=VIDEO)],
    )
    for seconds in range(1, 11):
        following = tool_step("video", 30.0) if seconds in (3, 7) else tool_step("caption", 2.0)
        graph.record([llm_step("plan", 0, seconds), following])
    return DemandEstimator(graph, ONE_SECOND_A_TOKEN)


def decide(elapsed_s: float, knob: float = 0.5, cold: tuple[BackendSpec, ...] = (VIT, VIDEO)) -> dict[str, tuple[object, ...]]:
    decisions = prewarm_decisions(
        plan_and_execute(),
        RunPosition("plan"),
        elapsed_s,
        is_cold=lambda backend: backend in cold,
        prewarm_seconds=lambda backend: 2.0,
        knob=knob,
    )
    return {d.unit: (d.selection_probability, pytest.approx(d.effectiveness), d.start_after_s, d.trigger) for d in decisions}


def test_a_likely_branch_waits_until_effectiveness_falls_to_k() -> None:
    # caption: p_s = 0.8. At t_s = 0, P(t_c > 2) = 0.8, p_e = 0.64 > K: too early.
    # At t_s = 2, P(t_c > 4) = 0.6, p_e = 0.48 <= K: prewarm.
    assert decide(0.0)["caption"] == (0.8, 0.64, 2.0, False)
    assert decide(1.9)["caption"] == (0.8, 0.8 * 0.7, 2.0, False)
    assert decide(2.0)["caption"] == (0.8, 0.48, 2.0, True)


def test_an_unlikely_branch_is_never_prewarmed() -> None:
    assert decide(0.0)["video"] == (0.2, 0.16, None, False)
    assert decide(9.0)["video"] == (0.2, 0.0, None, False)


def test_a_smaller_k_prewarms_the_unlikely_branch_too() -> None:
    # K = 0.1: p_e = 0.2 * P(t_c > t_s + 2) <= 0.1 once half the plans would be done, t_c > 5.
    assert decide(3.0, knob=0.1)["video"] == (0.2, 0.2 * 0.5, 3.0, True)


def test_a_k_at_or_above_the_effectiveness_prewarms_at_once() -> None:
    assert decide(0.0, knob=0.8)["caption"] == (0.8, 0.64, 0.0, True)


def test_warm_backends_are_left_alone() -> None:
    assert set(decide(5.0, cold=(VIDEO,))) == {"video"}
    assert decide(5.0, cold=()) == {}


def test_the_knob_must_be_a_probability() -> None:
    with pytest.raises(InvalidField, match="knob: must be in"):
        decide(0.0, knob=0.0)


@given(
    st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=30),
    st.integers(min_value=1, max_value=9),
    st.floats(min_value=0.05, max_value=1.0),
    st.floats(min_value=0, max_value=70),
    st.floats(min_value=0, max_value=20),
)
def test_trigger_means_p_s_reaches_k_and_p_e_has_fallen_to_k(
    plan_seconds: list[int], caption_runs: int, knob: float, elapsed: float, warmup: float
) -> None:
    units = [make_unit("plan", {"caption": 0.5, "video": 0.5}), make_unit("caption", backend=VIT), make_unit("video", backend=VIDEO)]
    graph = PDGraph("pe", units)
    for index, seconds in enumerate(plan_seconds):
        following = tool_step("caption", 1.0) if index % 10 < caption_runs else tool_step("video", 1.0)
        graph.record([llm_step("plan", 0, seconds), following])
    decisions = prewarm_decisions(
        DemandEstimator(graph, ONE_SECOND_A_TOKEN), RunPosition("plan"), elapsed, lambda b: True, lambda b: warmup, knob
    )
    for decision in decisions:
        expected_p_e = decision.selection_probability * sum(s > elapsed + warmup for s in plan_seconds) / len(plan_seconds)
        assert decision.effectiveness == pytest.approx(expected_p_e)
        reaches_k = decision.selection_probability >= knob
        assert decision.trigger == (reaches_k and decision.effectiveness <= knob + 1e-9)
        assert (decision.start_after_s is None) == (not reaches_k)
