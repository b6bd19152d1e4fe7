"""Application simulator: a pure discrete-event replay of application runs (Hermes PDGraph runs drawn from
application files) on a cluster of LLM engines with batch slots, under a chosen run order (FCFS, Parrot,
VTC, ATLAS, SRPT on the mean, Gittins, an oracle, EDF, least slack) and optional Eq. 3 prewarming.
``forethought bench hermes`` drives it."""

from forethought.appsim.engine import Engine, LlmRequest
from forethought.appsim.estimates import EstimateCache
from forethought.appsim.order import ORDERS, RunOrder, build_order
from forethought.appsim.result import PrewarmTally, RunOutcome, SimResult
from forethought.appsim.service_time import EngineModel
from forethought.appsim.simulator import ClusterSpec, backend_key, simulate
from forethought.appsim.state import RunState
from forethought.appsim.workload import AppRun, with_deadlines

__all__ = [
    "ORDERS",
    "AppRun",
    "ClusterSpec",
    "Engine",
    "EngineModel",
    "EstimateCache",
    "LlmRequest",
    "PrewarmTally",
    "RunOrder",
    "RunOutcome",
    "RunState",
    "SimResult",
    "backend_key",
    "build_order",
    "simulate",
    "with_deadlines",
]
