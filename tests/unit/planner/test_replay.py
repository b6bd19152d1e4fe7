"""A plan's running phase in simulation: on the work it was planned for it takes the plan's estimate; on
other work JobRun's adjustment carries it to the end."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from forethought.planner import CostModel, OutputLengthCDF, chain_summary_job, heuristic_plan, realise, samullm_plan
from forethought.planner.replay import execute_plan

from .conftest import CountingClock, make_model, make_pool
from .test_search import cdfs_for, small_ensemble

KNOWN = OutputLengthCDF.from_observations([40])


@pytest.mark.parametrize("method", ["samullm", "max", "min"])
def test_a_plan_executed_on_its_own_work_takes_its_estimate(method: str) -> None:
    job = small_ensemble()
    cdfs = cdfs_for(job, KNOWN)
    plan = (samullm_plan(job, cdfs, random.Random(0), CountingClock()) if method == "samullm"
            else heuristic_plan(method, job, cdfs, random.Random(0), CountingClock()))
    executed = execute_plan(job, plan.stages, realise(job, cdfs, random.Random(0)), CostModel(job))
    assert executed.inference_s == pytest.approx(plan.inference_s)
    assert [planned for planned, _ in executed.stage_times] == [stage.duration_s for stage in plan.stages]


def test_longer_true_outputs_take_longer_and_every_request_still_finishes() -> None:
    job = chain_summary_job(make_model("s"), make_model("e", "13b"), [[300, 300, 200], [400]], make_pool(4),
                            evaluations=2)
    cdfs = cdfs_for(job, KNOWN)
    plan = samullm_plan(job, cdfs, random.Random(0), CountingClock())
    longer = replace(job, requests=tuple(replace(r, output_tokens=120) for r in job.requests))
    truth = realise(longer, {}, random.Random(0))
    executed = execute_plan(longer, plan.stages, truth, CostModel(longer))
    assert executed.inference_s > plan.inference_s
    assert executed.turns >= len(plan.stages)
