"""Calibration: probes and their rows, fitting, held-out error arithmetic, profiles on disk, applying them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from forethought.costmodel.registry import A100_80GB
from forethought.engine.executor import BatchShape
from forethought.planner import (
    CostModel,
    DevicePool,
    ExecutionPlan,
    Job,
    JobRequest,
    LatencyCoefficients,
    LinearLatencyExecutor,
    LinearTerms,
    ModelNode,
)
from forethought.planner.calibration import (
    CalibratedCosts,
    CalibratedProfile,
    CalibrationGrid,
    DecodeProbe,
    HeldOutCase,
    HeldOutResult,
    PrefillProbe,
    calibrated_cost_model,
    decode_rows,
    fit_calibration,
    load_profile,
    mean_error,
    mean_wall_error,
    predict_heldout,
    prefill_rows,
    profile_from_dict,
    profile_path,
    profile_to_dict,
    save_profile,
)
from forethought.planner.latency import DECODE, PREFILL

from .conftest import FixedExecutor, make_model

MODEL = make_model("m", max_seq_len=2048)
# A "true" engine: 20 ms + 2 us a token for a prefill, 10 ms + 1 us a context token for a decode, any B.
TRUE = LatencyCoefficients({
    PREFILL: {1: LinearTerms(0.0, 1e-6, 1e-6, 0.02)},
    DECODE: {1: LinearTerms(0.0, 0.5e-6, 0.5e-6, 0.01)},
})
TRUE_ENGINE = LinearLatencyExecutor(MODEL, 1, TRUE)


def measured_rows(grid: CalibrationGrid) -> list[tuple[BatchShape, float]]:
    rows = []
    for probe in grid.prefill_probes():
        shape = BatchShape(prefill_tokens=probe.batch * probe.prompt_tokens, prefill_requests=probe.batch)
        rows.extend(prefill_rows(probe, [TRUE_ENGINE.iteration_time(shape)] * 2 + [99.0]))  # one outlier of three
    for probe in grid.decode_probes():
        steps = [TRUE_ENGINE.iteration_time(BatchShape(decode_requests=probe.batch,
                                                       decode_context_tokens=probe.batch * (probe.context_tokens + k)))
                 for k in range(probe.steps)]
        rows.extend(decode_rows(probe, [sum(steps) / len(steps), 9.0, sum(steps) / len(steps)]))
    return rows


def test_prefill_probes_stay_inside_one_iterations_budget() -> None:
    grid = CalibrationGrid(prefill_batches=(1, 8), prompt_lengths=(100, 300), prefill_budget=1000)
    assert grid.prefill_probes() == (PrefillProbe(1, 100), PrefillProbe(1, 300), PrefillProbe(8, 100))
    with pytest.raises(ValueError, match="decode_steps"):
        CalibrationGrid(decode_steps=1)


def test_a_prefill_probe_is_one_row_of_its_median_and_a_decode_probe_one_of_its_mean_step() -> None:
    [(shape, seconds)] = prefill_rows(PrefillProbe(4, 50), [0.3, 0.1, 5.0])
    assert (shape.prefill_tokens, shape.prefill_requests, seconds) == (200, 4, 0.3)
    # Steps hold 10, 11 and 12 tokens a request: the mean step stands at 11.
    [(shape, seconds)] = decode_rows(DecodeProbe(2, 10, 3), [0.2, 0.1, 0.9])
    assert (shape.decode_requests, shape.decode_context_tokens, seconds) == (2, 22, 0.2)


def test_fitting_the_true_engines_rows_predicts_held_out_batches_exactly() -> None:
    grid = CalibrationGrid(prefill_batches=(1, 2, 4), prompt_lengths=(32, 64, 128), decode_batches=(1, 2, 4),
                           decode_contexts=(16, 64), decode_steps=4)
    cases = (HeldOutCase(2, 100, 8), HeldOutCase(4, 40, 3))
    heldout = [(case, predict_heldout(case, MODEL, TRUE_ENGINE), 1.0) for case in cases]
    profile = fit_calibration("p", MODEL, 1, "test engine", measured_rows(grid), heldout, load_s=3.0)
    assert profile.rows == len(grid.prefill_probes()) + len(grid.decode_probes())
    assert [result.error for result in profile.heldout] == pytest.approx([0.0, 0.0], abs=1e-6)


def test_a_held_out_batch_is_one_prefill_then_a_decode_a_further_token() -> None:
    # 3 requests of 10 tokens, 4 tokens each: 1 prefill iteration (first token) + 3 decodes, 1 s each.
    assert predict_heldout(HeldOutCase(3, 10, 4), MODEL, FixedExecutor(1.0)) == pytest.approx(4.0)


def test_the_error_is_relative_to_the_measurement_and_averaged() -> None:
    results = [HeldOutResult(HeldOutCase(1, 1, 1), 2.0, 2.5, wall_s=5.0),
               HeldOutResult(HeldOutCase(1, 1, 1), 4.0, 3.6, wall_s=4.0)]
    assert [result.error for result in results] == pytest.approx([0.25, 0.1])
    assert mean_error(results) == pytest.approx(0.175)
    assert mean_wall_error(results) == pytest.approx((0.5 + 0.1) / 2)
    with pytest.raises(ValueError):
        mean_error([])
    with pytest.raises(ValueError):
        mean_wall_error([HeldOutResult(HeldOutCase(1, 1, 1), 2.0, 2.5)])


def fitted_profile() -> CalibratedProfile:
    grid = CalibrationGrid(prefill_batches=(1, 2), prompt_lengths=(32, 64, 128), decode_batches=(1, 2),
                           decode_contexts=(16, 64), decode_steps=3)
    case = HeldOutCase(2, 50, 5)
    return fit_calibration("smol-test", MODEL, 1, "test engine", measured_rows(grid),
                           [(case, predict_heldout(case, MODEL, TRUE_ENGINE) * 1.1, 2.0)], load_s=7.5, command="cmd",
                           clock="engine-cpu")


def test_a_profile_round_trips_through_json_and_loads_by_name_or_path(tmp_path: Path) -> None:
    profile = fitted_profile()
    again = profile_from_dict(json.loads(json.dumps(profile_to_dict(profile))))
    assert again == profile
    path = save_profile(profile, profile_path("smol-test", tmp_path))
    assert path == tmp_path / "smol-test.json"
    assert load_profile("smol-test", tmp_path) == profile
    assert load_profile(str(path)) == profile
    with pytest.raises(FileNotFoundError, match="saved: smol-test"):
        load_profile("other", tmp_path)
    (tmp_path / "broken.json").write_text('{"format": 1, "name": "x"}')
    with pytest.raises(ValueError, match="broken.json is not a calibrated profile"):
        load_profile("broken", tmp_path)


def test_profiles_apply_to_models_of_their_shape_with_their_load_time() -> None:
    profile = fitted_profile()
    same_shape = ModelNode("summarizer", MODEL.spec, MODEL.hidden_size, 2048)
    other = make_model("judge", "13b")
    job = Job((same_shape, other), (JobRequest("a", "summarizer", 10), JobRequest("b", "judge", 10)),
              DevicePool(A100_80GB, 2))
    costs = CalibratedCosts((profile,))
    build = costs.executors(lambda model, tp: FixedExecutor(1.0))
    assert isinstance(build(same_shape, 2), LinearLatencyExecutor) and build(same_shape, 2).tp == 2
    assert isinstance(build(other, 1), FixedExecutor)
    loads = costs.load_times(job)
    assert loads.load_time(same_shape, ExecutionPlan(1, 1)) == pytest.approx(7.5)
    assert loads.load_time(same_shape, ExecutionPlan(1, 2)) == pytest.approx(7.5 + loads.tp_setup_s)
    assert loads.load_time(other, ExecutionPlan(1, 2)) != pytest.approx(7.5)  # the formula's
    cost = calibrated_cost_model(job, [profile])
    assert isinstance(cost.executor("summarizer", 1), LinearLatencyExecutor)
    assert not isinstance(calibrated_cost_model(job).executor("summarizer", 1), LinearLatencyExecutor)
    assert isinstance(cost, CostModel)
