"""vLLM's log probabilities in the contract's form: the sampled token, then the asked-for alternatives by rank."""

from __future__ import annotations

from forethought.backends.vllm.backend import positions_of
from forethought.domain import PositionLogprobs, TokenLogprob
from vllm.logprobs import Logprob


def test_the_sampled_token_comes_first_and_the_alternatives_follow_by_rank() -> None:
    # vLLM's mapping holds the sampled token (here ranked third, outside the two asked for) and the top two.
    position = {7: Logprob(-2.5, 3, " c"), 5: Logprob(-1.0, 2, " b"), 4: Logprob(-0.5, 1, " a")}
    assert positions_of([7], [position], alternatives=2) == (
        PositionLogprobs(TokenLogprob(7, -2.5, " c"), (TokenLogprob(4, -0.5, " a"), TokenLogprob(5, -1.0, " b"))),)


def test_no_alternatives_lists_only_the_sampled_token_and_nothing_asked_gives_nothing() -> None:
    positions = [{4: Logprob(-0.5, 1, "x")}, {9: Logprob(-0.1, 1, None)}]
    assert positions_of([4, 9], positions, alternatives=0) == (
        PositionLogprobs(TokenLogprob(4, -0.5, "x")), PositionLogprobs(TokenLogprob(9, -0.1, "")))
    assert positions_of([4], None, alternatives=0) == ()
