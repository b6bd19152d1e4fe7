"""Online calibration of forecasts for a served model the predictor was not trained on.

An unseen model starts from the model-agnostic forecast; each of its completed requests adds the residual
``log1p(true length) - model-agnostic log estimate``. The forecast then moves by the residuals' median,
shrunk toward no move while there are few (``n / (n + prior)``), and once there are ``min_spread`` of
them their spread around their median replaces the training spread (so p90 covers the model's own
lengths). Residuals are
kept per model, newest ``capacity``, for at most ``max_models`` models; the predictor rebuilds them from
its observation store on start.
"""

from __future__ import annotations

import threading
from collections import deque

import numpy as np

from forethought.predict.buckets import ResidualSpread


class OnlineCalibration:
    """Per-model residuals of the model-agnostic forecast; ``adjust`` gives a model's shift and spread."""

    def __init__(self, capacity: int = 2000, prior: float = 10.0, min_spread: int = 20, max_models: int = 256) -> None:
        self.capacity = capacity
        self.max_models = max_models
        self.prior = prior
        self.min_spread = min_spread
        self._residuals: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def add(self, model: str, true_tokens: float, log_estimate: float) -> None:
        with self._lock:
            if model not in self._residuals and len(self._residuals) >= self.max_models:
                # a bounded number of models: the one calibrated longest ago makes room
                del self._residuals[next(iter(self._residuals))]
            residuals = self._residuals.setdefault(model, deque(maxlen=self.capacity))
            residuals.append(float(np.log1p(true_tokens) - log_estimate))

    def count(self, model: str) -> int:
        with self._lock:
            return len(self._residuals.get(model, ()))

    def adjust(self, model: str, spread: ResidualSpread) -> tuple[float, ResidualSpread]:
        """The log shift of ``model``'s forecasts and the spread around the shifted estimate (``spread``
        itself until there are ``min_spread`` residuals)."""
        with self._lock:
            residuals = np.asarray(self._residuals.get(model, ()), float)
        if not len(residuals):
            return 0.0, spread
        median = float(np.median(residuals))
        shift = len(residuals) / (len(residuals) + self.prior) * median
        if len(residuals) < self.min_spread:
            return shift, spread
        return shift, ResidualSpread(tuple(float(value) for value in np.sort(residuals - median)))
