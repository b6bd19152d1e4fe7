"""When to prewarm the backend of a downstream unit (Hermes section 3.4, Eq. 3).

While a unit runs, for each unit that may follow it on a cold backend, a prewarm started now (``t_s``)
and lasting ``t_p`` is effective when the current unit is still running once it is done::

    p_e = p_s * P(t_c > t_s + t_p)

``p_s`` is the branch probability of the downstream unit and ``t_c`` the current unit's completion time,
read from its (refined) recorded executions. With the knob K: no prewarm when ``p_s < K``; otherwise
prewarm at the moment ``p_e`` falls to K. Earlier wastes the backend's idle time, later leaves the
warm-up on the critical path. A smaller K prewarms more eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from forethought.demand.estimate import DemandEstimator, RunPosition
from forethought.demand.graph import END, BackendSpec
from forethought.domain import require

EXPECTED_EFFECTIVENESS = 0.5
"""The knob K (Hermes section 5.1)."""


@dataclass(frozen=True)
class PrewarmDecision:
    """For one downstream unit on a cold backend: Eq. 3 now, and when ``p_e`` falls to K.

    ``start_after_s`` is measured from the start of the current unit; None when ``p_s < K`` (never).
    """

    unit: str
    backend: BackendSpec
    selection_probability: float
    effectiveness: float
    start_after_s: float | None
    trigger: bool


def prewarm_decisions(
    estimator: DemandEstimator,
    position: RunPosition,
    elapsed_s: float,
    is_cold: Callable[[BackendSpec], bool],
    prewarm_seconds: Callable[[BackendSpec], float],
    knob: float = EXPECTED_EFFECTIVENESS,
) -> list[PrewarmDecision]:
    """One decision per downstream unit of ``position.unit`` whose backend ``is_cold``.

    Args:
        elapsed_s: how long the current unit has run (``t_s``, from its start).
        prewarm_seconds: ``t_p`` of a backend.
        knob: K in (0, 1].
    """
    require(0 < knob <= 1, "knob", "must be in (0, 1]")
    require(elapsed_s >= 0, "elapsed_s", "must be >= 0")
    durations = estimator.unit_seconds(position)
    decisions = []
    for unit, selection in estimator.graph.branch_probabilities(position.unit).items():
        backend = estimator.graph.units[unit].backend if unit != END else None
        if backend is None or not is_cold(backend):
            continue
        warmup_s = prewarm_seconds(backend)
        require(warmup_s >= 0, f"prewarm_seconds({unit})", "must be >= 0")
        effectiveness = selection * _still_running(durations, elapsed_s + warmup_s)
        start_after = _start_after(durations, selection, warmup_s, knob)
        trigger = start_after is not None and elapsed_s >= start_after
        decisions.append(PrewarmDecision(unit, backend, selection, effectiveness, start_after, trigger))
    return decisions


def _still_running(sorted_durations: list[float], moment_s: float) -> float:
    """P(t_c > moment) over the sorted sampled completion times."""
    running = sum(1 for duration in sorted_durations if duration > moment_s)
    return running / len(sorted_durations)


def _start_after(sorted_durations: list[float], selection: float, warmup_s: float, knob: float) -> float | None:
    """The earliest ``t_s`` at which ``selection * P(t_c > t_s + warmup_s) <= knob``; None when ``p_s < K``."""
    if selection < knob:
        return None
    allowed_running = int(len(sorted_durations) * knob / selection + 1e-9)
    finished_needed = len(sorted_durations) - allowed_running
    if finished_needed <= 0:
        return 0.0
    return max(0.0, sorted_durations[finished_needed - 1] - warmup_s)
