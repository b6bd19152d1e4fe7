"""Stage costs: t_E is the first model's finish, T_E the FLOPs done by then over t_E, load time only for a
model started or re-planned, and model-level pipelining inside a stage."""

from __future__ import annotations

import math
import random

import pytest
from forethought.planner import (
    CostModel,
    ExecutionPlan,
    Job,
    JobRequest,
    LatencyCoefficients,
    LinearLatencyExecutor,
    LinearTerms,
    LoadTimeModel,
    OutputLengthCDF,
    chain_summary_job,
    realise,
)
from forethought.planner.model_run import run_model

from .conftest import fixed_executors, make_model, make_pool

P11, P21, P12 = ExecutionPlan(1, 1), ExecutionPlan(2, 1), ExecutionPlan(1, 2)


def known(request_id: str, model: str, output: int, inputs: tuple[str, ...] = ()) -> JobRequest:
    return JobRequest(request_id, model, 10, inputs, output_tokens=output)


def make_cost(job: Job, startup_s: float = 0.0) -> CostModel:
    loads = LoadTimeModel(startup_s=startup_s, tp_setup_s=0.0, read_bytes_per_s=1e30)
    return CostModel(job, fixed_executors(1.0), loads)


def two_models() -> Job:
    requests = (known("a0", "a", 4), known("a1", "a", 4), known("b0", "b", 10))
    return Job((make_model("a"), make_model("b")), requests, make_pool(4))


def test_the_stage_ends_when_its_first_model_finishes() -> None:
    job = two_models()
    costing = make_cost(job).for_stage(realise(job, {}, random.Random(0)), {})
    estimate = costing.estimate({"a": P11, "b": P11})
    assert estimate.duration_s == 4.0
    assert estimate.devices == 2
    assert estimate.flops == pytest.approx(sum(run.flops_until(4.0) for run in estimate.runs.values()))
    assert estimate.throughput == pytest.approx(estimate.flops / 4.0)
    assert costing.cut({"a": P11, "b": P11}, 4.0) == ({"a0", "a1"}, {"b0": 4})


def test_tensor_parallelism_speeds_the_fixed_executor_and_load_time_is_paid_once() -> None:
    job = two_models()
    workload = realise(job, {}, random.Random(0))
    fresh = make_cost(job, startup_s=3.0).for_stage(workload, {})
    assert fresh.estimate({"b": P12}).duration_s == 3.0 + 5.0
    kept = make_cost(job, startup_s=3.0).for_stage(workload, {"b": P12})
    assert kept.estimate({"b": P12}).duration_s == 5.0
    assert kept.estimate({"b": P11}).duration_s == 13.0  # a new plan reloads


def test_a_model_the_workers_hold_pays_no_load_for_as_many_single_device_replicas() -> None:
    job = two_models()
    workload = realise(job, {}, random.Random(0))
    loads = LoadTimeModel(startup_s=3.0, tp_setup_s=0.0, read_bytes_per_s=1e30)
    held = CostModel(job, fixed_executors(1.0), loads, held={"b": 1}).for_stage(workload, {})
    assert held.estimate({"b": P11}).duration_s == 10.0
    assert held.estimate({"b": P21}).duration_s == 3.0 + 10.0  # a second replica loads (b0 is one request)
    assert held.estimate({"b": P12}).duration_s == 3.0 + 5.0  # the held replica is on one device
    assert held.estimate({"a": P11}).duration_s == 3.0 + 4.0


def test_runs_are_simulated_once_per_plan_and_upstream_plans() -> None:
    job = two_models()
    costing = make_cost(job).for_stage(realise(job, {}, random.Random(0)), {})
    costing.estimate({"a": P11})
    costing.estimate({"a": P11, "b": P11})
    costing.estimate({"a": P21, "b": P11})
    assert costing.simulations == 3


def test_a_fed_model_cut_at_the_stage_end_gives_the_whole_runs_t_e_and_flops() -> None:
    job = chain_summary_job(make_model("s"), make_model("e"), [[100, 100, 100], [100]], make_pool(2))
    workload = realise(job, {"s": OutputLengthCDF.from_observations([5, 9]),
                             "e": OutputLengthCDF.from_observations([30, 40])}, random.Random(1))
    cost = make_cost(job, startup_s=1.0)
    estimate = cost.for_stage(workload, {}).estimate({"s": P11, "e": P11})
    whole_s = run_model(job.model_by_name["s"], P11, workload.remaining_by_model["s"], {
        w.request_id: 0.0 for w in workload.remaining_by_model["s"]}, cost.executor("s", 1), cost.engine_config("s", 1), 1.0)
    ready_e = {w.request_id: max(whole_s.finish_s.get(source, 0.0) for source in w.inputs)
               for w in workload.remaining_by_model["e"]}
    whole_e = run_model(job.model_by_name["e"], P11, workload.remaining_by_model["e"], ready_e,
                        cost.executor("e", 1), cost.engine_config("e", 1), 1.0)
    assert whole_s.end_s < whole_e.end_s < math.inf  # the evaluator runs past the stage's end, so its run is cut
    assert 0 < whole_e.flops_until(whole_s.end_s)
    assert estimate.duration_s == whole_s.end_s
    assert estimate.flops == whole_s.flops_until(whole_s.end_s) + whole_e.flops_until(whole_s.end_s)


def test_a_downstream_model_in_the_same_stage_is_pipelined() -> None:
    job = chain_summary_job(make_model("s"), make_model("e"), [[100, 100], [100]], make_pool(2))
    lengths = {"doc0/chunk0": 3, "doc0/chunk1": 3, "doc1/chunk0": 2, "doc0/eval0": 2, "doc1/eval0": 2}
    job = Job(job.models, tuple(_with_length(r, lengths[r.request_id]) for r in job.requests), job.devices, job.edges)
    costing = make_cost(job).for_stage(realise(job, {}, random.Random(0)), {})
    estimate = costing.estimate({"s": P11, "e": P11})
    assert estimate.runs["s"].finish_s == {"doc0/chunk0": 3.0, "doc0/chunk1": 6.0, "doc1/chunk0": 2.0}
    assert estimate.runs["e"].finish_s == {"doc1/eval0": 4.0}  # cut at the stage's end: doc0/eval0 ends at 8
    assert estimate.duration_s == 6.0
    finished, generated = costing.cut({"s": P11, "e": P11}, 6.0)
    assert finished == {"doc0/chunk0", "doc0/chunk1", "doc1/chunk0", "doc1/eval0"}
    assert generated == {}  # doc0/eval0 became ready at 6.0 and had not started


def test_a_stage_whose_inputs_are_missing_is_refused() -> None:
    job = chain_summary_job(make_model("s"), make_model("e"), [[100]], make_pool(2))
    costing = make_cost(job).for_stage(realise(job, {"s": _cdf(), "e": _cdf()}, random.Random(0)), {})
    with pytest.raises(ValueError, match="can finish"):
        costing.estimate({"e": P11})


def _with_length(request: JobRequest, output: int) -> JobRequest:
    return JobRequest(request.request_id, request.model, request.prompt_tokens, request.inputs, output)


def _cdf() -> OutputLengthCDF:
    return OutputLengthCDF.from_observations([5])


def test_a_fitted_linear_executor_drives_the_simulation() -> None:
    terms = {"prefill": {1: LinearTerms(0.0, 0.0, 0.0, 0.5)}, "decode": {1: LinearTerms(0.0, 0.0, 0.0, 0.25)}}
    job = Job((make_model("a"),), (known("a0", "a", 5),), make_pool(1))
    cost = CostModel(job, lambda model, tp: LinearLatencyExecutor(model, tp, LatencyCoefficients(terms)),
                     LoadTimeModel(startup_s=0.0, tp_setup_s=0.0, read_bytes_per_s=1e30))
    estimate = cost.for_stage(realise(job, {}, random.Random(0)), {}).estimate({"a": P11})
    assert estimate.duration_s == 0.5 + 4 * 0.25  # one prefill, four decodes
