"""SamuLLM's greedy execution-stage search (section 4.2, Algorithm 1), adapted from Optimus.

Each stage starts empty (or, without preemption, with the models that must keep their plans) and grows
one step at a time: every plan of every model whose inputs are ready (finished, or running in the stage:
model-level pipelining) is a candidate. A plan of a model already in the stage replaces its plan when it
uses more devices; a plan of a new model is added when the devices suffice. The candidate with the highest
throughput gain per added device, ``(T_E - T_E*) / (#gpu_E - #gpu_E*)``, becomes the stage; the stage is
complete when no candidate fits or every candidate lowers the throughput. Ties go to the earlier model in
the graph's order, then the smaller plan.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Container, Mapping

from forethought.planner.job import Job, validate_job
from forethought.planner.lengths import OutputLengthCDF
from forethought.planner.plans import ExecutionPlan, valid_plans
from forethought.planner.schedule import ApplicationPlan, plan_stages
from forethought.planner.stage_cost import Assignments, CostModel, StageCosting
from forethought.planner.workload import Workload, realise


def ready_models(job: Job, workload: Workload, stage: Container[str]) -> tuple[str, ...]:
    """Unfinished models whose input models are finished or in ``stage`` (Algorithm 1, line 5)."""
    return tuple(
        name for name in job.model_order
        if not workload.is_model_finished(name)
        and all(workload.is_model_finished(source) or source in stage for source in job.upstream[name])
    )


def greedy_stage(costing: StageCosting, kept: Mapping[str, ExecutionPlan]) -> Assignments:
    """Algorithm 1, lines 3-23: grows one stage by the best throughput gain per device."""
    job, devices = costing.cost.job, costing.cost.job.devices.count
    best = dict(kept)
    current = costing.estimate(best)
    while True:
        chosen, chosen_gain, chosen_estimate = None, 0.0, current
        for candidate in _candidates(job, costing.workload, best, kept, devices):
            estimate = costing.estimate(candidate)
            gain = (estimate.throughput - current.throughput) / (estimate.devices - current.devices)
            if chosen is None or gain > chosen_gain:
                chosen, chosen_gain, chosen_estimate = candidate, gain, estimate
        if chosen is None or chosen_gain < 0:
            return best
        best, current = chosen, chosen_estimate


def _candidates(job: Job, workload: Workload, best: Assignments, kept: Mapping[str, ExecutionPlan],
                devices: int) -> list[dict[str, ExecutionPlan]]:
    """Algorithm 1, lines 5-16: the stages one step larger than ``best``."""
    used = sum(plan.devices for plan in best.values())
    candidates = []
    for name in ready_models(job, workload, best):
        if name in kept:
            continue
        current = best.get(name)
        free = devices - used + (current.devices if current else 0)
        for plan in valid_plans(job.model_by_name[name], job.devices, free):
            if current is None or plan.devices > current.devices:
                candidates.append({**best, name: plan})
    return candidates


def samullm_plan(
    job: Job,
    cdfs: Mapping[str, OutputLengthCDF],
    rng: random.Random,
    clock: Callable[[], float],
    cost: CostModel | None = None,
    preemption: bool = True,
) -> ApplicationPlan:
    """Validates ``job``, samples its output lengths and searches its stages (Algorithm 1).

    Args:
        cdfs: each model's output-length eCDF (unused for requests whose length is known).
        rng: the sampler's seeded generator; the same seed gives the same plan.
        clock: seconds, read before and after the search to report its time.
        cost: the cost model (default: the cost profiles' executors, default load times and engine).
        preemption: False keeps every started model on its plan until it finishes.
    """
    started = clock()
    validate_job(job)
    workload = realise(job, cdfs, rng)
    plan = plan_stages("samullm", cost or CostModel(job), workload, greedy_stage, clock, preemption)
    return _timed_from(plan, clock() - started)


def _timed_from(plan: ApplicationPlan, search_s: float) -> ApplicationPlan:
    return ApplicationPlan(plan.method, plan.stages, search_s, plan.simulations)
