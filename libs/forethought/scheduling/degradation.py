"""Degraded, not down: tracking an optional dependency's health (DESIGN: the predictor is advice).

The scheduler keeps serving when the predictor is absent or failing: requests simply carry no forecast,
and every queue order then ties on size and falls back to arrival order (FCFS). This tracker turns a
stream of call outcomes into transitions, so the shell logs once per change and sets one gauge.
"""

from __future__ import annotations

import enum


class Health(enum.Enum):
    OK = "ok"
    DEGRADED = "degraded"


class DependencyHealth:
    """Current health of one dependency; ``record`` returns the new state only when it changed."""

    def __init__(self, name: str, configured: bool) -> None:
        self.name = name
        self.state = Health.OK if configured else Health.DEGRADED
        self.last_error = "" if configured else "not configured"

    @property
    def degraded(self) -> bool:
        return self.state is Health.DEGRADED

    def record(self, ok: bool, error: str = "") -> Health | None:
        """One call's outcome; the new state if this outcome changed it, else None."""
        new = Health.OK if ok else Health.DEGRADED
        self.last_error = "" if ok else error
        if new is self.state:
            return None
        self.state = new
        return new
