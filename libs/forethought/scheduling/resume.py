"""Resuming a stream whose worker was lost after it began (the failover Dynamo and llm-d offer for
deterministic decoding): the continuation is the same request with the tokens already delivered appended
to its prompt, asking for the rest of its output. Greedy decoding (temperature 0) continues exactly as
the lost worker would have; a seeded request continues as a valid sample of the same model, though not
the one the lost worker would have drawn. Any other request cannot be resumed without changing what a
client could have observed, so it fails with how much was delivered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from forethought.domain import MAX_PROMPT_TOKENS, GenerationRequest


def resumable(request: GenerationRequest) -> bool:
    """Whether a continuation of ``request`` is one its client may be given: greedy or seeded decoding,
    without presence or frequency penalties (they count only the tokens one engine generated, so a
    continuation would stop penalising the tokens already delivered)."""
    sampling = request.sampling
    return (sampling.temperature == 0 or sampling.seed is not None) and not (sampling.presence_penalty
                                                                           or sampling.frequency_penalty)


def continuation(request: GenerationRequest, delivered: Sequence[int]) -> GenerationRequest | None:
    """The request that produces the rest of ``request``'s output after the tokens ``delivered``; None
    when it cannot be resumed (not ``resumable``, nothing left to generate, or a prompt grown too long).
    It asks for no prompt scores: the first attempt sent the prompt's, and its prompt now holds output."""
    remaining = request.max_tokens - len(delivered)
    prompt = (*request.prompt_token_ids, *delivered)
    if not resumable(request) or remaining < 1 or len(prompt) > MAX_PROMPT_TOKENS:
        return None
    return replace(request, prompt_token_ids=prompt, max_tokens=remaining,
                   sampling=replace(request.sampling, prompt_logprobs=None))
