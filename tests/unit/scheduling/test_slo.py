"""SLO outcomes of a finished request: TTFT from arrival, mean TPOT over the later tokens."""

from __future__ import annotations

import pytest
from forethought.scheduling.slo import SloOutcome, slo_outcomes

CASES = [
    # ttft_slo, tpot_slo, arrival, first_token, finished, output_tokens -> outcomes
    ("no objectives", 0.0, 0.0, 10.0, 10.5, 12.0, 20, []),
    ("ttft met on the boundary", 0.5, 0.0, 10.0, 10.5, 12.0, 20, [SloOutcome("ttft", True)]),
    ("ttft missed", 0.4, 0.0, 10.0, 10.5, 12.0, 20, [SloOutcome("ttft", False)]),
    ("tpot met: 19 gaps in 1.8 s", 0.0, 0.1, 10.0, 10.5, 12.3, 20, [SloOutcome("tpot", True)]),
    ("tpot missed: 19 gaps in 2.0 s", 0.0, 0.1, 10.0, 10.5, 12.5, 20, [SloOutcome("tpot", False)]),
    ("both", 1.0, 0.05, 10.0, 10.5, 12.5, 21, [SloOutcome("ttft", True), SloOutcome("tpot", False)]),
    ("one token judges no tpot", 1.0, 0.05, 10.0, 10.5, 10.5, 1, [SloOutcome("ttft", True)]),
    ("no first token judges nothing", 1.0, 0.05, 10.0, 0.0, 12.0, 0, []),
]


@pytest.mark.parametrize(("ttft", "tpot", "arrival", "first", "finished", "tokens", "expected"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_slo_outcomes(ttft, tpot, arrival, first, finished, tokens, expected) -> None:
    assert slo_outcomes(ttft, tpot, arrival, first, finished, tokens) == expected
