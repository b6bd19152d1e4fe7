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
