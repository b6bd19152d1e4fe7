"""The Max- and Min-heuristics: all devices to one model, or the devices split evenly among as many
models as possible, each choosing plans by the cost model's throughput."""

from __future__ import annotations

import random

import pytest
from forethought.planner import ExecutionPlan, OutputLengthCDF, ensembling_job, heuristic_plan

from .conftest import CountingClock, make_model, make_pool


def ensemble(names: tuple[str, ...], devices: int = 4, prompts: int = 6):
    models = tuple(make_model(name) for name in names)
    job = ensembling_job(models, [20 + i for i in range(prompts)], make_pool(devices))
    return job, {name: OutputLengthCDF.from_observations(range(10, 60)) for name in names}


def test_max_gives_every_stage_all_devices_in_the_graphs_order() -> None:
    job, cdfs = ensemble(("a", "b", "c"))
    plan = heuristic_plan("max", job, cdfs, random.Random(0), CountingClock())
    assert [stage.assignments[0][0] for stage in plan.stages] == ["a", "b", "c"]
    assert all(len(stage.assignments) == 1 and stage.assignments[0][1].devices == 4 for stage in plan.stages)


def test_min_splits_the_devices_as_evenly_as_possible() -> None:
    job, cdfs = ensemble(("a", "b", "c"))
    plan = heuristic_plan("min", job, cdfs, random.Random(0), CountingClock())
    assert plan.method == "min-heuristic"
    assert sorted(p.devices for _, p in plan.stages[0].assignments) == [1, 1, 2]
    for stage in plan.stages:
        assert sum(p.devices for _, p in stage.assignments) == 4


def test_min_takes_the_first_models_when_they_outnumber_the_devices() -> None:
    job, cdfs = ensemble(("a", "b", "c", "d", "e"), devices=4)
    plan = heuristic_plan("min", job, cdfs, random.Random(0), CountingClock())
    assert plan.stages[0].assignments == tuple((name, ExecutionPlan(1, 1)) for name in "abcd")


def test_min_without_preemption_keeps_running_plans() -> None:
    job, cdfs = ensemble(("a", "b", "c"), prompts=12)
    plan = heuristic_plan("min", job, cdfs, random.Random(0), CountingClock(), preemption=False)
    first: dict[str, ExecutionPlan] = {}
    for stage in plan.stages:
        for name, chosen in stage.assignments:
            assert first.setdefault(name, chosen) == chosen


def test_an_unknown_heuristic_is_refused() -> None:
    job, cdfs = ensemble(("a",))
    with pytest.raises(ValueError, match="one of"):
        heuristic_plan("median", job, cdfs, random.Random(0), CountingClock())
