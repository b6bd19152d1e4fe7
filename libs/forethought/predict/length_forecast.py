"""The predictor's answer and its input rules (SSJF section 3.1; DESIGN.md "predictor": a distribution).

A forecast carries a point estimate (the conditional median for the default L1 head), quantiles
p10..p90, the 5-class bucket and the bucket histogram, and says whether it came from the model or from
the length cache of observed prompts (paper section 6).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from forethought.domain import InvalidField

MAX_PROMPT_CHARS = 200_000
"""What the predictor reads of a prompt: a longer one is read as its first and last halves of this. The
forecast looks only at a prompt's ends (the backbone its last 512 tokens, the word table its first and last
2,048 characters), and the length cache and the observation store keep what was read, so one long prompt
costs no more than this."""


@dataclass(frozen=True)
class LengthForecast:
    """Forecast output length in served-model tokens.

    Attributes:
        mean: point estimate in tokens.
        quantiles: percent (10, 25, 50, 75, 90) -> tokens, non-decreasing in the percent.
        bucket: index of the predicted 5-class length bucket (0 = shortest).
        histogram: probability of each bucket, summing to 1.
        source: ``"model"`` or ``"cache"`` (an observed length of the same prompt).
    """

    mean: float
    quantiles: dict[int, float]
    bucket: int
    histogram: tuple[float, ...]
    source: Literal["model", "cache"] = "model"
    bucket_edges: tuple[float, ...] = field(default=(), compare=False)


def validate_prompt(prompt: object, field_name: str = "prompt", max_chars: int = MAX_PROMPT_CHARS) -> str:
    """``prompt`` as the predictor reads it: the prompt itself, or its first and last halves of ``max_chars``
    when it is longer. Raises ``InvalidField`` unless it is a non-blank string."""
    if not isinstance(prompt, str):
        raise InvalidField(field_name, "must be a string")
    if not prompt.strip():
        raise InvalidField(field_name, "must not be empty")
    if len(prompt) > max_chars:
        head = max_chars // 2
        return prompt[:head] + prompt[len(prompt) - (max_chars - head):]
    return prompt


def validate_prompts(prompts: Sequence[object], max_chars: int = MAX_PROMPT_CHARS, field_name: str = "prompts") -> list[str]:
    """The prompts as the predictor reads them (``validate_prompt``); ``InvalidField`` names the first bad one (``prompts[i]``)."""
    return [validate_prompt(prompt, f"{field_name}[{index}]", max_chars) for index, prompt in enumerate(prompts)]


def validate_length(actual_tokens: object, field_name: str = "actual_tokens") -> int:
    if isinstance(actual_tokens, bool) or not isinstance(actual_tokens, int) or actual_tokens < 0:
        raise InvalidField(field_name, "must be a non-negative integer")
    return actual_tokens
