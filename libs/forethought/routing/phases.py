"""Phased placement: ordered phases, each a filter of candidates and a cost to minimise (Preble section 4.2).

The weighted framework (``scoring.py``) sums scores in [0, 1], which cannot say "exploit the cached
prefix, and explore only when that does not apply": Preble's E2 decides lexicographically, phase first
and cost second. Here a policy is an ordered tuple of phases; each either places the request, returning
a ``Decision`` that names the phase and the costs it compared, or passes (``None``) to the next one. A
phase narrows the workers to its candidates (its filter) and takes the cheapest by ``lowest_cost`` (the
picker every phase shares: the first candidate of least cost, as ``min`` keeps it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from forethought.routing.router import RoutingRequest

ContextT = TypeVar("ContextT", contravariant=True)


@dataclass(frozen=True)
class Decision:
    """Where a request went, the phase that placed it, and the costs that phase compared."""

    worker_id: str
    phase: str
    costs: dict[str, float] = field(default_factory=dict)


class Phase(Protocol[ContextT]):
    """One step of a phased policy: a decision, or ``None`` to pass the request to the next phase."""

    @property
    def name(self) -> str: ...

    def decide(self, request: RoutingRequest, context: ContextT) -> Decision | None: ...


class NoPhaseDecided(LookupError):
    """Every phase passed: a phased policy must end with a phase that always decides."""


def first_decision(phases: Sequence[Phase[ContextT]], request: RoutingRequest, context: ContextT) -> Decision:
    """The decision of the first phase that places ``request``.

    Raises:
        NoPhaseDecided: every phase passed.
    """
    for phase in phases:
        decision = phase.decide(request, context)
        if decision is not None:
            return decision
    raise NoPhaseDecided(f"no phase of {[phase.name for phase in phases]} placed {request.request_id}")


def lowest_cost(candidates: Sequence[str], cost: Callable[[str], float]) -> tuple[str, dict[str, float]]:
    """The candidate of least ``cost`` (the first of equal ones) and every candidate's cost."""
    costs = {worker_id: cost(worker_id) for worker_id in candidates}
    return min(candidates, key=costs.__getitem__), costs
