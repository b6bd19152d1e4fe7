"""What the scheduler says when an optional dependency goes down or comes back: one gauge, one log line.

The state itself is ``forethought.scheduling.DependencyHealth``; the predictor client and the placement
loop both report through ``record_outcome``.
"""

from __future__ import annotations

import logging

from forethought.scheduling.degradation import DependencyHealth, Health
from forethought.telemetry.metrics import DEGRADED

log = logging.getLogger(__name__)


def record_outcome(health: DependencyHealth, ok: bool, error: str, went_down: str, came_back: str) -> None:
    """Records one call's outcome; on a change of state, sets the degraded gauge and logs one line.

    ``went_down``: the warning, with ``{error}`` where the failure goes; ``came_back``: the recovery line.
    """
    change = health.record(ok, error)
    if change is None:
        return
    DEGRADED.labels("scheduler", health.name).set(1 if change is Health.DEGRADED else 0)
    if change is Health.DEGRADED:
        log.warning(went_down.format(error=error))
    else:
        log.info(came_back)
