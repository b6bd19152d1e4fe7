"""The paper's two competitors (SamuLLM section 5, "Competitors"), on the same cost model and stage loop.

* Max-heuristic: every stage gives all devices to one model, the first ready one in the graph's order,
  with the plan of the highest throughput under the cost model. It has no no-preemption variant (a stage
  runs its one model to the end anyway).
* Min-heuristic (after Saturn's): every stage runs as many ready models as possible and splits the devices
  among them as evenly as possible (shares differ by at most one device); of all the splits and plans that
  do so, the cost model picks the highest stage throughput. Ready models are taken in the graph's order
  when they outnumber the devices, and a model downstream of one in the stage counts as ready (both run,
  pipelined). Without preemption, the models already running keep their plans and the rest share the
  devices they leave.

Both re-plan at every stage boundary, as the paper's competitors do (they support model preemption).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Mapping

from forethought.planner.job import Job, validate_job
from forethought.planner.lengths import OutputLengthCDF
from forethought.planner.plans import ExecutionPlan, valid_plans
from forethought.planner.schedule import ApplicationPlan, plan_stages
from forethought.planner.search import ready_models
from forethought.planner.stage_cost import Assignments, CostModel, StageCosting
from forethought.planner.workload import Workload, realise


def max_heuristic_stage(costing: StageCosting, kept: Mapping[str, ExecutionPlan]) -> Assignments:
    """All devices to the first ready model, with its highest-throughput plan."""
    job = costing.cost.job
    name = ready_models(job, costing.workload, {})[0]
    plans = valid_plans(job.model_by_name[name], job.devices)
    widest = max(plan.devices for plan in plans)
    best = max((costing.estimate({name: plan}) for plan in plans if plan.devices == widest),
               key=lambda estimate: estimate.throughput)
    return dict(best.assignments)


def min_heuristic_stage(costing: StageCosting, kept: Mapping[str, ExecutionPlan]) -> Assignments:
    """As many ready models as fit, the free devices split evenly; the best split by throughput."""
    job, workload = costing.cost.job, costing.workload
    free = job.devices.count - sum(plan.devices for plan in kept.values())
    ready = [name for name in _ready_with_downstream(job, workload, kept) if name not in kept]
    for count in range(min(len(ready), free), 0, -1):
        splits = list(_even_splits(job, ready[:count], free))
        if splits:
            estimates = [costing.estimate({**kept, **split}) for split in splits]
            return dict(max(estimates, key=lambda estimate: estimate.throughput).assignments)
    return dict(kept)


def _ready_with_downstream(job: Job, workload: Workload, stage: Mapping[str, ExecutionPlan]) -> list[str]:
    """Ready models, then those whose inputs are ready or running: everything that may run together."""
    chosen: set[str] = set(stage)
    while True:
        found = [name for name in ready_models(job, workload, chosen) if name not in chosen]
        if not found:
            return [name for name in job.model_order if name in chosen]
        chosen.update(found)


def _even_splits(job: Job, names: list[str], devices: int) -> list[dict[str, ExecutionPlan]]:
    """Every assignment giving each of ``names`` ``devices // n`` or one more device, all devices used."""
    base, extra = divmod(devices, len(names))
    splits: list[dict[str, ExecutionPlan]] = []
    for wider in itertools.combinations(range(len(names)), extra):
        options = []
        for index, name in enumerate(names):
            share = base + (1 if index in wider else 0)
            plans = [plan for plan in valid_plans(job.model_by_name[name], job.devices, share) if plan.devices == share]
            options.append(plans)
        for combination in itertools.product(*options):
            splits.append(dict(zip(names, combination)))
    return splits


def heuristic_plan(
    method: str,
    job: Job,
    cdfs: Mapping[str, OutputLengthCDF],
    rng: random.Random,
    clock: Callable[[], float],
    cost: CostModel | None = None,
    preemption: bool = True,
) -> ApplicationPlan:
    """Plans ``job`` with ``max`` or ``min`` (see the module) on the sampled lengths; search time included."""
    choosers = {"max": max_heuristic_stage, "min": min_heuristic_stage}
    if method not in choosers:
        raise ValueError(f"heuristic must be one of {sorted(choosers)}, not {method!r}")
    started = clock()
    validate_job(job)
    workload = realise(job, cdfs, rng)
    plan = plan_stages(f"{method}-heuristic", cost or CostModel(job), workload, choosers[method], clock, preemption)
    return ApplicationPlan(plan.method, plan.stages, clock() - started, plan.simulations)
