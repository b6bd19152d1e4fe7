"""Whether a finished request met its service-level objectives (BROS section 2: a real-time request's TTFT
and TPOT SLOs), as the scheduler sees them: TTFT from arrival at the scheduler to the first token relayed,
TPOT as the mean gap between the later tokens."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SloOutcome:
    objective: str  # "ttft" or "tpot"
    met: bool


def slo_outcomes(ttft_slo_s: float, tpot_slo_s: float, arrival_s: float, first_token_s: float,
                 finished_s: float, output_tokens: int) -> list[SloOutcome]:
    """One outcome per objective the request set (0 = none) and its timing can judge.

    Args:
        first_token_s: when the first token was relayed; 0 when none was.
        output_tokens: tokens generated; TPOT needs two or more.
    """
    outcomes = []
    if ttft_slo_s > 0 and first_token_s > 0:
        outcomes.append(SloOutcome("ttft", first_token_s - arrival_s <= ttft_slo_s))
    if tpot_slo_s > 0 and first_token_s > 0 and output_tokens > 1:
        outcomes.append(SloOutcome("tpot", (finished_s - first_token_s) / (output_tokens - 1) <= tpot_slo_s))
    return outcomes
