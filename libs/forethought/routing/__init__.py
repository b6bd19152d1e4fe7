"""Global placement: Preble's E2 and the baselines, built by name from one registry."""

from forethought.routing.e2 import E2Decision, E2Router
from forethought.routing.ledger import Assignment, LedgerRouter, NoWorkers
from forethought.routing.phase_time import PhaseTimeModel, PrebleLinearPhaseTimes
from forethought.routing.registry import ROUTER_NAMES, build_router
from forethought.routing.router import Router, RoutingRequest

__all__ = [
    "ROUTER_NAMES",
    "Assignment",
    "E2Decision",
    "E2Router",
    "LedgerRouter",
    "NoWorkers",
    "PhaseTimeModel",
    "PrebleLinearPhaseTimes",
    "Router",
    "RoutingRequest",
    "build_router",
]
