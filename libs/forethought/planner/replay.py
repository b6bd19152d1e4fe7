"""A plan's running phase in simulation (SamuLLM sections 4.3 and 5): the planned stages executed on the
job's true work with the paper's dynamic stage adjustment.

The search estimates a plan on sampled output lengths; what the plan is worth is how long it takes on the
lengths the models really produce. ``execute_plan`` drives ``JobRun`` (the same state machine the planner
service runs jobs with) in virtual time: each turn simulates the models ``JobRun`` placed, with the cost
model, until the first of them finishes; the finished requests are reported, and ``JobRun`` adjusts the
next stage (a model that finished early ends its stage; one that runs late keeps its devices when no later
stage needs them). With ``output_tokens`` set to the truth, the benchmark compares methods on real
end-to-end time, not on their own estimates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from forethought.planner.job import Job
from forethought.planner.plans import ExecutionPlan
from forethought.planner.running import JobRun
from forethought.planner.schedule import Stage
from forethought.planner.stage_cost import CostModel
from forethought.planner.workload import Workload


@dataclass(frozen=True)
class ExecutedPlan:
    """The simulated running phase: its total time and each planned stage's (estimate, time taken)."""

    inference_s: float
    stage_times: tuple[tuple[float, float], ...]
    turns: int


def execute_plan(job: Job, stages: Sequence[Stage], workload: Workload, cost: CostModel) -> ExecutedPlan:
    """Runs ``stages`` on ``workload`` (the true work) with ``JobRun``'s adjustment; ``cost`` times it.

    Raises:
        RuntimeError: a turn in which no placed model can finish (the plan does not cover the work).
    """
    run, _ = JobRun(job, tuple(stages)).schedule(0.0)
    now, turns = 0.0, 0
    loaded: dict[str, ExecutionPlan] = {}
    while not workload.is_done:
        placed = dict(run.running)
        costing = cost.for_stage(workload, loaded)
        estimate = costing.estimate(placed)
        if not math.isfinite(estimate.duration_s):
            raise RuntimeError(f"no placed model can finish: {', '.join(sorted(placed))}")
        finished, generated = costing.cut(placed, estimate.duration_s)
        now += estimate.duration_s
        for request_id in sorted(finished):
            run = run.with_finished(request_id, now)
        workload = workload.advance(finished, generated)
        loaded = {name: plan for name, plan in placed.items() if not workload.is_model_finished(name)}
        turns += 1
        if not workload.is_done:
            run, _ = run.schedule(now)
    return ExecutedPlan(now, run.stage_times(now), turns)
