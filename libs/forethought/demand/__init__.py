"""Application demand (Hermes sections 3.2-3.4): PDGraphs, Monte Carlo estimates with online refinement,
Gittins and least-slack ranks, and prewarm decisions. Pure: randomness and time come in as arguments;
the only I/O is ``load_application`` reading the file it is given."""

from forethought.demand.application_file import (
    PROFILING_RUNS,
    application_from_dict,
    draw_runs,
    load_application,
    require_application_name,
)
from forethought.demand.consumption import Consumption, DemandVariable, Observation, UnitExecution
from forethought.demand.distribution import DiscreteDemand, discretize
from forethought.demand.estimate import (
    MAX_WALK_UNITS,
    WALKS,
    DemandEstimate,
    DemandEstimator,
    LlmSeconds,
    PerTokenSeconds,
    RunPosition,
)
from forethought.demand.graph import END, MAX_RECORDED, BackendKind, BackendSpec, FunctionalUnit, PDGraph, UnitProfile
from forethought.demand.prewarm_decision import EXPECTED_EFFECTIVENESS, PrewarmDecision, prewarm_decisions
from forethought.demand.rank import gittins_rank, least_slack
from forethought.demand.refinement import (
    BUCKETS,
    CORRELATION_THRESHOLD,
    Bucketing,
    Correlation,
    RecordFilter,
    bucketed_pearson,
    correlations,
)
from forethought.demand.serialization import graph_from_dict, graph_to_dict

__all__ = [
    "BUCKETS",
    "CORRELATION_THRESHOLD",
    "END",
    "EXPECTED_EFFECTIVENESS",
    "MAX_RECORDED",
    "MAX_WALK_UNITS",
    "PROFILING_RUNS",
    "WALKS",
    "BackendKind",
    "BackendSpec",
    "Bucketing",
    "Consumption",
    "Correlation",
    "DemandEstimate",
    "DemandEstimator",
    "DemandVariable",
    "DiscreteDemand",
    "FunctionalUnit",
    "LlmSeconds",
    "Observation",
    "PDGraph",
    "PerTokenSeconds",
    "PrewarmDecision",
    "RecordFilter",
    "RunPosition",
    "UnitExecution",
    "UnitProfile",
    "application_from_dict",
    "bucketed_pearson",
    "correlations",
    "discretize",
    "draw_runs",
    "gittins_rank",
    "graph_from_dict",
    "graph_to_dict",
    "least_slack",
    "load_application",
    "prewarm_decisions",
    "require_application_name",
]
