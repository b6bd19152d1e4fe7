"""SamuLLM's per-iteration latency model (section 2 and section 4.1, Eq. 1, 2 and 5) as an engine executor.

One iteration takes ``t_comp + t_prep + t_samp``, each a linear function whose slope and intercept depend
on the number of running requests ``B`` (Eq. 5): ``t_comp`` of the iteration's FLOPs, ``t_prep`` of the
padded length ``B * s``, ``t_samp`` of the total length ``S``. FLOPs follow Eq. 1 (prefill) and 2 (decode):

    FLOPs_prefill = L (c B s + 2 B h s^2 / tp)        FLOPs_decode = L (c B + 2 h S / tp)

This differs from ``forethought.costmodel`` (one slope per term for every batch size, weights read once per
iteration), so it is an executor of its own, its coefficients data (``LatencyCoefficients``).
``fit_latency_coefficients`` fits them by least squares from ``(batch shape, measured seconds)`` rows; the
three intercepts of Eq. 5 are fitted as their sum, the only part a total time identifies.

What the engine's ``BatchShape`` carries decides two readings, stated here: ``c`` is taken per device
(``c / tp``, as ``L c`` counts the weights one device multiplies), and since a shape holds totals but no
longest length, ``s`` of a prefill is the mean new length per request (a prefill then has ``B s = S``).
An iteration with any prompt tokens counts as a prefill (the paper's engine never mixes them).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from forethought.engine.executor import BatchShape
from forethought.planner.plans import ModelNode

PREFILL = "prefill"
DECODE = "decode"


@dataclass(frozen=True)
class IterationFeatures:
    """The regressors of Eq. 5 for one iteration on one device of a ``tp`` group."""

    phase: str
    requests: int
    flops: float
    padded_tokens: float
    total_tokens: float


def iteration_flops(batch: BatchShape, model: ModelNode, tp: int = 1) -> float:
    """Eq. 1 plus Eq. 2 for one device of a ``tp`` group (``tp=1``: the whole model's work)."""
    layers, c, h = model.spec.layers, model.matmul_params_per_layer, model.hidden_size
    flops = 0.0
    if batch.prefill_tokens:
        new_per_request = batch.prefill_tokens / max(1, batch.prefill_requests)
        attended = batch.prefill_tokens * (new_per_request + batch.prefill_context_tokens / max(1, batch.prefill_requests))
        flops += layers * (c * batch.prefill_tokens + 2 * h * attended) / tp
    if batch.decode_requests:
        flops += layers * (c * batch.decode_requests + 2 * h * batch.decode_context_tokens) / tp
    return flops


def prefill_flops(model: ModelNode, tokens: int) -> float:
    """Eq. 1 for one request of ``tokens`` prompt tokens, the whole model."""
    return model.spec.layers * (model.matmul_params_per_layer * tokens + 2 * model.hidden_size * tokens * tokens)


def decode_flops(model: ModelNode, context: int) -> float:
    """Eq. 2 for one request attending to ``context`` tokens, the whole model."""
    return model.spec.layers * (model.matmul_params_per_layer + 2 * model.hidden_size * context)


def iteration_features(batch: BatchShape, model: ModelNode, tp: int) -> IterationFeatures:
    """Phase, ``B``, FLOPs, ``B * s`` and ``S`` of one iteration (see the module's readings)."""
    total = batch.prefill_tokens + batch.prefill_context_tokens + batch.decode_context_tokens + batch.decode_requests
    phase = PREFILL if batch.prefill_tokens else DECODE
    # NOTE: a BatchShape holds no longest length, so B * s reads as S (see the module's readings).
    flops = iteration_flops(batch, model, tp)
    return IterationFeatures(phase, batch.num_requests, flops, float(total), float(total))


@dataclass(frozen=True)
class LinearTerms:
    """Slopes of Eq. 5's three parts and their intercepts' sum, for one phase and one ``B``."""

    flops_s: float
    padded_token_s: float
    total_token_s: float
    intercept_s: float

    def seconds(self, features: IterationFeatures) -> float:
        return (self.flops_s * features.flops + self.padded_token_s * features.padded_tokens
                + self.total_token_s * features.total_tokens + self.intercept_s)


@dataclass(frozen=True)
class LatencyCoefficients:
    """``a[B]`` and ``b[B]`` per phase. A ``B`` between two fitted ones takes the linear blend of their
    estimates; one outside them, the nearest fitted ``B``'s."""

    terms: Mapping[str, Mapping[int, LinearTerms]]

    def seconds(self, features: IterationFeatures) -> float:
        table = self.terms.get(features.phase) or self.terms[PREFILL if features.phase == DECODE else DECODE]
        sizes = sorted(table)
        index = bisect.bisect_left(sizes, features.requests)
        if index < len(sizes) and sizes[index] == features.requests:
            return table[sizes[index]].seconds(features)
        if index == 0 or index == len(sizes):
            return table[sizes[min(index, len(sizes) - 1)]].seconds(features)
        low, high = sizes[index - 1], sizes[index]
        weight = (features.requests - low) / (high - low)
        return (1 - weight) * table[low].seconds(features) + weight * table[high].seconds(features)


class LinearLatencyExecutor:
    """``Executor`` and ``IterationEstimator`` for one replica of ``model`` on ``tp`` devices (Eq. 5)."""

    def __init__(self, model: ModelNode, tp: int, coefficients: LatencyCoefficients) -> None:
        if not coefficients.terms:
            raise ValueError("latency coefficients hold no phase")
        self.model = model
        self.tp = tp
        self.coefficients = coefficients

    def iteration_time(self, batch: BatchShape) -> float:
        if batch.is_empty:
            return 0.0
        return max(0.0, self.coefficients.seconds(iteration_features(batch, self.model, self.tp)))

    def estimate_iteration_time(self, batch: BatchShape) -> float:
        return self.iteration_time(batch)


def fit_latency_coefficients(
    rows: Iterable[tuple[BatchShape, float]], model: ModelNode, tp: int
) -> LatencyCoefficients:
    """Least-squares ``a[B]``, ``b[B]`` per phase from measured iterations.

    Args:
        rows: ``(batch shape, measured seconds)`` of iterations of ``model`` on ``tp`` devices.
    Returns:
        The fitted coefficients; collinear regressors (a decode's FLOPs are linear in ``S`` at fixed
        ``B``) get the least-norm solution, which predicts the same times.
    """
    grouped: dict[tuple[str, int], list[tuple[IterationFeatures, float]]] = defaultdict(list)
    for batch, seconds in rows:
        if not batch.is_empty:
            features = iteration_features(batch, model, tp)
            grouped[(features.phase, features.requests)].append((features, seconds))
    if not grouped:
        raise ValueError("fitting latency coefficients needs at least one non-empty measured iteration")
    terms: dict[str, dict[int, LinearTerms]] = defaultdict(dict)
    for (phase, requests), found in sorted(grouped.items()):
        terms[phase][requests] = _fit_one(found)
    return LatencyCoefficients({phase: dict(table) for phase, table in terms.items()})


def _fit_one(rows: list[tuple[IterationFeatures, float]]) -> LinearTerms:
    design = np.array([[f.flops, f.padded_tokens, f.total_tokens, 1.0] for f, _ in rows], dtype=float)
    measured = np.array([seconds for _, seconds in rows], dtype=float)
    scale = np.abs(design).max(axis=0)
    scale[scale == 0] = 1.0  # an all-zero column keeps a zero slope
    solution, *_ = np.linalg.lstsq(design / scale, measured, rcond=None)
    flops_s, padded_s, total_s, intercept = (solution / scale).tolist()
    return LinearTerms(flops_s, padded_s, total_s, intercept)
