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
    """Return ``prompt`` if it is a non-blank string of at most ``max_chars``, else raise ``InvalidField``."""
    if not isinstance(prompt, str):
        raise InvalidField(field_name, "must be a string")
    if not prompt.strip():
        raise InvalidField(field_name, "must not be empty")
    if len(prompt) > max_chars:
        raise InvalidField(field_name, f"must be at most {max_chars} characters (got {len(prompt)})")
    return prompt


def validate_prompts(prompts: Sequence[object], max_chars: int = MAX_PROMPT_CHARS, field_name: str = "prompts") -> None:
    """Raise ``InvalidField`` naming the first bad prompt (``prompts[i]``)."""
    for index, prompt in enumerate(prompts):
        validate_prompt(prompt, f"{field_name}[{index}]", max_chars)


def validate_length(actual_tokens: object, field_name: str = "actual_tokens") -> int:
    if isinstance(actual_tokens, bool) or not isinstance(actual_tokens, int) or actual_tokens < 0:
        raise InvalidField(field_name, "must be a non-negative integer")
    return actual_tokens
