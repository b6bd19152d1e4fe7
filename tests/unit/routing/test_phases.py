"""The phased-placement framework: phases tried in order, the lowest-cost picker."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from forethought.routing import RoutingRequest
from forethought.routing.phases import (
    Decision,
    NoPhaseDecided,
    first_decision,
    lowest_cost,
)

REQUEST = RoutingRequest("r1", 32, (1, 2), 16)


@dataclass(frozen=True)
class Fixed:
    """A phase that always answers ``worker_id`` (``None``: passes)."""

    name: str
    worker_id: str | None

    def decide(self, request: RoutingRequest, context: object) -> Decision | None:
        return Decision(self.worker_id, self.name) if self.worker_id is not None else None


@pytest.mark.parametrize(
    ("costs", "expected"),
    [
        ({"w0": 2.0, "w1": 1.0, "w2": 3.0}, "w1"),
        ({"w0": 1.0, "w1": 1.0}, "w0"),  # equal costs: the first candidate
        ({"w2": 0.5}, "w2"),
    ],
    ids=["cheapest", "tie-first", "single"],
)
def test_lowest_cost_takes_the_first_cheapest_candidate_and_reports_all_costs(
    costs: dict[str, float], expected: str
) -> None:
    assert lowest_cost(list(costs), costs.__getitem__) == (expected, costs)


def test_the_first_phase_that_decides_places_the_request() -> None:
    phases = (Fixed("a", None), Fixed("b", "w1"), Fixed("c", "w2"))
    assert first_decision(phases, REQUEST, context=None) == Decision("w1", "b")


def test_every_phase_passing_is_an_error_naming_the_phases() -> None:
    with pytest.raises(NoPhaseDecided, match=r"\['a', 'b'\] placed r1"):
        first_decision((Fixed("a", None), Fixed("b", None)), REQUEST, context=None)
