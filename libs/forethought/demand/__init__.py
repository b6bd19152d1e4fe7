"""Application demand (Hermes section 3.2): PDGraphs of functional units, their recorded consumption and
branch probabilities, kept as plain dicts."""

from forethought.demand.consumption import Consumption, DemandVariable, Observation, UnitExecution
from forethought.demand.graph import END, MAX_RECORDED, BackendKind, BackendSpec, FunctionalUnit, PDGraph, UnitProfile
from forethought.demand.serialization import graph_from_dict, graph_to_dict

__all__ = [
    "END",
    "MAX_RECORDED",
    "BackendKind",
    "BackendSpec",
    "Consumption",
    "DemandVariable",
    "FunctionalUnit",
    "Observation",
    "PDGraph",
    "UnitExecution",
    "UnitProfile",
    "graph_from_dict",
    "graph_to_dict",
]
