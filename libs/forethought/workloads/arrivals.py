"""Synthetic arrival processes: Poisson (BROS section 7.1, following vLLM) and Gamma with a chosen burstiness.

A Gamma process with coefficient of variation ``cv`` has inter-arrival times of shape ``1 / cv**2``;
``cv = 1`` is Poisson, larger values are burstier (the Azure code trace has CV 13).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from forethought.workloads.workload import TraceRequest


def poisson_arrivals(rate_per_s: float, count: int, rng: np.random.Generator,
                     start_s: float = 0.0) -> list[float]:
    """``count`` arrival times of a Poisson process of ``rate_per_s``, the first one after ``start_s``."""
    return gamma_arrivals(rate_per_s, 1.0, count, rng, start_s)


def gamma_arrivals(rate_per_s: float, cv: float, count: int, rng: np.random.Generator,
                   start_s: float = 0.0) -> list[float]:
    """``count`` arrival times with Gamma inter-arrival times of mean ``1 / rate_per_s`` and CV ``cv``."""
    if rate_per_s <= 0:
        raise ValueError(f"rate_per_s must be positive, got {rate_per_s}")
    if cv <= 0:
        raise ValueError(f"cv must be positive, got {cv}")
    shape = 1.0 / (cv * cv)
    gaps = rng.gamma(shape, 1.0 / (rate_per_s * shape), count)
    return cast(list[float], (start_s + np.cumsum(gaps)).tolist())


def with_arrivals(requests: Sequence[TraceRequest], arrivals_s: Sequence[float]) -> list[TraceRequest]:
    """The requests re-timed to ``arrivals_s`` (one time per request, in order)."""
    if len(requests) != len(arrivals_s):
        raise ValueError(f"{len(requests)} requests but {len(arrivals_s)} arrival times")
    return [request.at(arrival) for request, arrival in zip(requests, arrivals_s)]
