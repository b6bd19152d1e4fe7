"""Prefill and decode time functions for load costs (Preble sections 2.1 and 4.2).

Preble profiles prefill time as linear in the uncached prompt tokens and one decode iteration as linear
in the context tokens, then feeds both to E2's load cost. Any object with these two methods works, so a
named profile from ``forethought.costmodel`` drops in; ``PrebleLinearPhaseTimes`` is the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class PhaseTimeModel(Protocol):
    """What a load cost needs from a cost model."""

    def prefill_time(self, tokens: int) -> float:
        """Seconds to prefill ``tokens`` uncached prompt tokens."""

    def decode_time(self, batch: int, context: int) -> float:
        """Seconds for one decode iteration of ``batch`` sequences holding ``context`` tokens in all."""


@dataclass(frozen=True)
class PrebleLinearPhaseTimes:
    """Linear fits of Preble's Mistral-7B on A6000 profile (Figures 1 and 2).

    Prefill: 0.115 ms per uncached token (the slope of Preble's fit beyond 384 tokens; no tokens, no
    time). Decode iteration: 22 ms for the linear layers of a small batch plus 0.186 us per context
    token of attention.
    """

    prefill_s_per_token: float = 0.115e-3
    decode_base_s: float = 22e-3
    decode_s_per_context_token: float = 0.186e-6

    def prefill_time(self, tokens: int) -> float:
        return self.prefill_s_per_token * max(0, tokens)

    def decode_time(self, batch: int, context: int) -> float:
        return self.decode_base_s + self.decode_s_per_context_token * max(0, context) if batch > 0 else 0.0
