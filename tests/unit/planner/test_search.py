"""Algorithm 1: stages grown by throughput gain per device, ended at the first finish, with and without
preemption; the search time comes from the injected clock."""

from __future__ import annotations

import random

from forethought.planner import (
    ApplicationPlan,
    CostModel,
    ExecutionPlan,
    Job,
    OutputLengthCDF,
    chain_summary_job,
    ensembling_job,
    heuristic_plan,
    ready_models,
    realise,
    samullm_plan,
)

from .conftest import CountingClock, make_model, make_pool


def small_ensemble(devices: int = 4, prompts: int = 12) -> Job:
    models = (make_model("m7"), make_model("m13", "13b"), make_model("m7b"))
    lengths = [random.Random(i).randint(5, 127) for i in range(prompts)]
    return ensembling_job(models, lengths, make_pool(devices))


def cdfs_for(job: Job, cdf: OutputLengthCDF) -> dict[str, OutputLengthCDF]:
    return {model.name: cdf for model in job.models}


def check_complete(job: Job, plan: ApplicationPlan) -> None:
    finished = [name for stage in plan.stages for name in stage.finished_models]
    assert sorted(finished) == sorted(model.name for model in job.models)
    for stage in plan.stages:
        assert sum(p.devices for _, p in stage.assignments) <= job.devices.count
    starts = [stage.start_s for stage in plan.stages]
    assert starts == sorted(starts) and starts[0] == 0.0


def test_one_device_runs_the_models_one_after_another(uniform_cdf: OutputLengthCDF) -> None:
    job = small_ensemble(devices=1, prompts=6)
    plan = samullm_plan(job, cdfs_for(job, uniform_cdf), random.Random(0), CountingClock())
    check_complete(job, plan)
    assert [len(stage.assignments) for stage in plan.stages] == [1, 1, 1]
    assert {p for stage in plan.stages for _, p in stage.assignments} == {ExecutionPlan(1, 1)}


def test_the_plan_is_complete_deterministic_and_timed_by_the_clock(uniform_cdf: OutputLengthCDF) -> None:
    job = small_ensemble()
    clock = CountingClock()
    plan = samullm_plan(job, cdfs_for(job, uniform_cdf), random.Random(1), clock)
    check_complete(job, plan)
    assert plan == samullm_plan(job, cdfs_for(job, uniform_cdf), random.Random(1), CountingClock())
    assert plan.search_s == clock.reads - 1
    assert plan.end_to_end_s == plan.inference_s + plan.search_s
    assert plan.inference_s == sum(stage.duration_s for stage in plan.stages)


def test_the_search_beats_both_heuristics_on_a_small_ensemble(uniform_cdf: OutputLengthCDF) -> None:
    job = small_ensemble()
    cdfs = cdfs_for(job, uniform_cdf)
    ours = samullm_plan(job, cdfs, random.Random(1), CountingClock()).inference_s
    most = heuristic_plan("max", job, cdfs, random.Random(1), CountingClock()).inference_s
    least = heuristic_plan("min", job, cdfs, random.Random(1), CountingClock()).inference_s
    assert ours <= min(most, least)


def test_without_preemption_a_started_model_keeps_its_plan(uniform_cdf: OutputLengthCDF) -> None:
    job = small_ensemble()
    plan = samullm_plan(job, cdfs_for(job, uniform_cdf), random.Random(1), CountingClock(), preemption=False)
    check_complete(job, plan)
    first_plan: dict[str, ExecutionPlan] = {}
    for stage in plan.stages:
        for name, chosen in stage.assignments:
            assert first_plan.setdefault(name, chosen) == chosen


def test_a_downstream_model_is_ready_once_its_input_runs_in_the_stage() -> None:
    job = chain_summary_job(make_model("s"), make_model("e"), [[100, 100]], make_pool(2))
    workload = realise(job, {"s": OutputLengthCDF.from_observations([5]), "e": OutputLengthCDF.from_observations([5])},
                       random.Random(0))
    assert ready_models(job, workload, set()) == ("s",)
    assert ready_models(job, workload, {"s"}) == ("s", "e")
    assert ready_models(job, workload.advance({"doc0/chunk0", "doc0/chunk1"}, {}), set()) == ("e",)


def test_a_chain_summary_finishes_every_request(uniform_cdf: OutputLengthCDF) -> None:
    job = chain_summary_job(make_model("s"), make_model("e", "13b"), [[900, 900, 400], [700], [300, 300]],
                            make_pool(2), evaluations=2)
    cost = CostModel(job)
    plan = samullm_plan(job, cdfs_for(job, uniform_cdf), random.Random(0), CountingClock(), cost=cost)
    check_complete(job, plan)
    assert plan.stages[-1].finished_models[-1] == "e"
