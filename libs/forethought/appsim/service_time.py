"""Seconds of an LLM request on an engine of a cost profile (``forethought.costmodel``), and how much
slower each request runs when the engine batches several (continuous batching).

A request's work is its time alone on the engine: one prefill of its prompt, then ``output - 1`` decode
iterations, the k-th attending to ``input + k`` tokens (summed in closed form: an iteration's time is
affine in its context). With ``n`` requests in the batch, each decode iteration serves all of them and
takes ``decode(n, n * C)`` instead of ``decode(1, C)``; every request then advances at
``decode(1, C) / decode(n, n * C)`` of its alone speed, ``C`` a reference context. That fluid slowdown
is what an iteration-level batching engine shows on average; it ignores the prefill and decode mix of
single iterations and KV-cache capacity (the slots bound the batch instead).
"""

from __future__ import annotations

from dataclasses import dataclass

from forethought.costmodel import CostProfile
from forethought.demand import BackendSpec, Consumption
from forethought.domain import require

REFERENCE_CONTEXT_TOKENS = 1024
"""Context per request at which the batching slowdown is taken."""


@dataclass(frozen=True)
class EngineModel:
    """An engine of ``profile`` with ``slots`` concurrent batch slots."""

    profile: CostProfile
    slots: int

    def __post_init__(self) -> None:
        require(self.slots >= 1, "slots", "must be >= 1")

    def request_seconds(self, input_tokens: int, output_tokens: int) -> float:
        """One request alone on the engine: its prefill, then its decode iterations."""
        seconds = self.profile.prefill_time(input_tokens)
        decodes = max(0, output_tokens - 1)
        if decodes:
            base = self.profile.decode_time(1, input_tokens)
            per_token = self.profile.decode_time(1, input_tokens + 1) - base
            seconds += decodes * base + per_token * decodes * (decodes + 1) / 2
        return seconds

    def unit_seconds(self, backend: BackendSpec, consumption: Consumption) -> float:
        """Service demand of an LLM unit: its ``parallelism`` requests, each alone (``llm_seconds`` of the
        demand estimator, in the same unit as the engine's work)."""
        return consumption.parallelism * self.request_seconds(consumption.input_tokens, consumption.output_tokens)

    def speed(self, batch: int) -> float:
        """Share of its alone speed each of ``batch`` running requests gets (1 for a batch of one)."""
        if batch <= 1:
            return 1.0
        alone = self.profile.decode_time(1, REFERENCE_CONTEXT_TOKENS)
        return alone / self.profile.decode_time(batch, batch * REFERENCE_CONTEXT_TOKENS)

    @property
    def capacity(self) -> float:
        """Seconds of alone work a full engine completes per second."""
        return self.slots * self.speed(self.slots)
