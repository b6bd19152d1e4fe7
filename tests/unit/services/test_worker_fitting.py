"""A worker lowers ``max_tokens`` to what its engine fits only when the request asks for it."""

from __future__ import annotations

from forethought.domain import GenerationRequest
from forethought.services.worker.servicer import fitted

PROMPT = tuple(range(100))


def test_a_ceiling_is_lowered_to_the_room_the_prompt_leaves() -> None:
    assert fitted(GenerationRequest("r", PROMPT, 256, fit_max_tokens=True), limit=300).max_tokens == 200


def test_a_length_that_fits_or_was_not_a_ceiling_is_kept() -> None:
    fits = GenerationRequest("r", PROMPT, 150, fit_max_tokens=True)
    exact = GenerationRequest("r", PROMPT, 256)
    assert fitted(fits, limit=300) is fits
    assert fitted(exact, limit=300) is exact  # refused later, naming max_tokens and the limit


def test_a_prompt_that_leaves_no_room_is_left_for_the_refusal() -> None:
    full = GenerationRequest("r", PROMPT, 256, fit_max_tokens=True)
    assert fitted(full, limit=100) is full
