"""Degraded, not down: a dependency's health changes only on transitions."""

from __future__ import annotations

from forethought.scheduling import DependencyHealth, Health


def test_an_unconfigured_dependency_starts_degraded() -> None:
    health = DependencyHealth("predictor", configured=False)
    assert health.degraded and health.last_error == "not configured"


def test_only_changes_of_state_are_reported() -> None:
    health = DependencyHealth("predictor", configured=True)
    outcomes = [(True, ""), (False, "timeout"), (False, "timeout"), (True, ""), (True, "")]
    changes = [health.record(ok, error) for ok, error in outcomes]
    assert changes == [None, Health.DEGRADED, None, Health.OK, None]
    assert not health.degraded and health.last_error == ""
