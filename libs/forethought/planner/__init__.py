"""SamuLLM's offline planner for multi-LLM jobs (paper 003): jobs and execution plans, the
sampling-then-simulation cost model, the greedy execution-stage search and its two baselines.

Pure and deterministic: random draws come from a seeded generator the caller passes, and the only clock is
the one a caller injects to time the search. docs/planner.md is the reference.
"""

from forethought.planner.applications import chain_summary_job, ensembling_job, routing_job
from forethought.planner.baselines import heuristic_plan, max_heuristic_stage, min_heuristic_stage
from forethought.planner.job import Job, JobRequest, validate_job
from forethought.planner.latency import (
    LatencyCoefficients,
    LinearLatencyExecutor,
    LinearTerms,
    fit_latency_coefficients,
    iteration_flops,
)
from forethought.planner.lengths import OutputLengthCDF, capped_length, load_castillo, read_castillo
from forethought.planner.load_time import LoadTimeModel
from forethought.planner.model_run import EngineSettings, ModelRun, run_model
from forethought.planner.plans import DevicePool, ExecutionPlan, ModelNode, replica_profile, valid_plans
from forethought.planner.schedule import ApplicationPlan, Stage, plan_stages
from forethought.planner.search import greedy_stage, ready_models, samullm_plan
from forethought.planner.stage_cost import CostModel, StageCosting, StageEstimate, profile_executors
from forethought.planner.workload import RequestWork, Workload, realise

__all__ = [
    "ApplicationPlan",
    "CostModel",
    "DevicePool",
    "EngineSettings",
    "ExecutionPlan",
    "Job",
    "JobRequest",
    "LatencyCoefficients",
    "LinearLatencyExecutor",
    "LinearTerms",
    "LoadTimeModel",
    "ModelNode",
    "ModelRun",
    "OutputLengthCDF",
    "RequestWork",
    "Stage",
    "StageCosting",
    "StageEstimate",
    "Workload",
    "capped_length",
    "chain_summary_job",
    "ensembling_job",
    "fit_latency_coefficients",
    "greedy_stage",
    "heuristic_plan",
    "iteration_flops",
    "load_castillo",
    "max_heuristic_stage",
    "min_heuristic_stage",
    "plan_stages",
    "profile_executors",
    "read_castillo",
    "ready_models",
    "realise",
    "replica_profile",
    "routing_job",
    "run_model",
    "samullm_plan",
    "valid_plans",
    "validate_job",
]
