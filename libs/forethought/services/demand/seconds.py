"""Seconds of an LLM unit's execution from the cost model (``forethought.costmodel``): what the demand
estimator's ``llm_seconds`` needs to turn recorded token lengths into service time.

A unit's ``parallelism`` requests run as one batch on a backend of the profile, alone: one prefill of
every prompt, which also yields each request's first token, then ``output - 1`` decode iterations, the
k-th attending to ``P * (I + k)`` tokens. Decode time is affine in the context, so the iterations sum in
constant time from two of them::

    seconds = prefill(P * I) + sum_{k=1}^{O-1} decode(P, P * (I + k))
            = prefill(P * I) + (O - 1) * decode(P, P * I) + (decode(P, P * (I + 1)) - decode(P, P * I)) * (O - 1) * O / 2

That is demand (service time), not latency under load, which is what Hermes's estimate ranks by.
"""

from __future__ import annotations

from collections.abc import Mapping

from forethought.costmodel import CostProfile
from forethought.demand import BackendSpec, Consumption


class CostModelSeconds:
    """``llm_seconds`` over named cost profiles: a unit's model runs on the profile of the same model
    and hardware as ``default`` when one exists, otherwise on ``default``."""

    def __init__(self, default: CostProfile, profiles: Mapping[str, CostProfile]) -> None:
        self.default = default
        self._by_model = {
            profile.model.name: profile for profile in profiles.values() if profile.hardware == default.hardware
        }

    def profile_for(self, model: str) -> CostProfile:
        return self._by_model.get(model, self.default)

    def __call__(self, backend: BackendSpec, consumption: Consumption) -> float:
        profile = self.profile_for(backend.model)
        parallel, prompt, output = consumption.parallelism, consumption.input_tokens, consumption.output_tokens
        seconds = profile.prefill_time(parallel * prompt)
        decodes = max(0, output - 1)
        if decodes:
            base = profile.decode_time(parallel, parallel * prompt)
            per_token = profile.decode_time(parallel, parallel * (prompt + 1)) - base
            seconds += decodes * base + per_token * decodes * (decodes + 1) / 2
        return seconds
