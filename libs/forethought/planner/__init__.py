"""SamuLLM's offline planner for multi-LLM jobs (paper 003): jobs and execution plans,
the output length sampler, the per-iteration latency model and the load-time table.

Pure and deterministic: random draws come from a seeded generator the caller passes, and the only clock is
the one a caller injects to time the search. docs/planner.md is the reference.
"""

from forethought.planner.applications import chain_summary_job, ensembling_job, routing_job
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
from forethought.planner.plans import DevicePool, ExecutionPlan, ModelNode, replica_profile, valid_plans

__all__ = [
    "DevicePool",
    "ExecutionPlan",
    "Job",
    "JobRequest",
    "LatencyCoefficients",
    "LinearLatencyExecutor",
    "LinearTerms",
    "LoadTimeModel",
    "ModelNode",
    "OutputLengthCDF",
    "capped_length",
    "chain_summary_job",
    "ensembling_job",
    "fit_latency_coefficients",
    "iteration_flops",
    "load_castillo",
    "read_castillo",
    "replica_profile",
    "routing_job",
    "valid_plans",
    "validate_job",
]
