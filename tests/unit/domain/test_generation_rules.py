"""The request rules, written once in forethought.domain: each broken rule names its field."""

from __future__ import annotations

from dataclasses import replace

import pytest
from forethought.domain import (
    MAX_LOGPROBS,
    MAX_PROMPT_TOKENS,
    MAX_TOKENS_LIMIT,
    GenerationRequest,
    InvalidField,
    SamplingParams,
    StructuredOutput,
    validate_generation,
)

VALID = GenerationRequest("r1", (1, 2, 3), max_tokens=4)


def test_a_request_that_keeps_every_rule_comes_back_unchanged() -> None:
    assert validate_generation(VALID) is VALID


@pytest.mark.parametrize(("change", "field"), [
    ({"request_id": ""}, "request_id"),
    ({"prompt_token_ids": ()}, "prompt_token_ids"),
    ({"prompt_token_ids": (1, -1)}, "prompt_token_ids"),
    ({"prompt_token_ids": (1,) * (MAX_PROMPT_TOKENS + 1)}, "prompt_token_ids"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": MAX_TOKENS_LIMIT + 1}, "max_tokens"),
    ({"sampling": SamplingParams(temperature=-0.1)}, "sampling.temperature"),
    ({"sampling": SamplingParams(temperature=2.5)}, "sampling.temperature"),
    ({"sampling": SamplingParams(temperature=float("nan"))}, "sampling.temperature"),
    ({"sampling": SamplingParams(top_p=0.0)}, "sampling.top_p"),
    ({"sampling": SamplingParams(top_p=1.5)}, "sampling.top_p"),
    ({"sampling": SamplingParams(top_k=-1)}, "sampling.top_k"),
    ({"sampling": SamplingParams(stop=("END", ""))}, "sampling.stop"),
    ({"sampling": SamplingParams(stop_token_ids=(2, -1))}, "sampling.stop_token_ids"),
    ({"sampling": SamplingParams(presence_penalty=2.5)}, "sampling.presence_penalty"),
    ({"sampling": SamplingParams(frequency_penalty=-2.01)}, "sampling.frequency_penalty"),
    ({"sampling": SamplingParams(frequency_penalty=float("nan"))}, "sampling.frequency_penalty"),
    ({"sampling": SamplingParams(repetition_penalty=0.0)}, "sampling.repetition_penalty"),
    ({"sampling": SamplingParams(repetition_penalty=float("inf"))}, "sampling.repetition_penalty"),
    ({"sampling": SamplingParams(logprobs=-1)}, "sampling.logprobs"),
    ({"sampling": SamplingParams(logprobs=MAX_LOGPROBS + 1)}, "sampling.logprobs"),
    ({"sampling": SamplingParams(structured_output=StructuredOutput())}, "sampling.structured_output"),
    ({"sampling": SamplingParams(structured_output=StructuredOutput(regex="a", json_object=True))}, "sampling.structured_output"),
    ({"sampling": SamplingParams(structured_output=StructuredOutput(json_schema="{not json"))},
     "sampling.structured_output.json_schema"),
    ({"sampling": SamplingParams(structured_output=StructuredOutput(json_schema="[1, 2]"))},
     "sampling.structured_output.json_schema"),
    ({"sampling": SamplingParams(structured_output=StructuredOutput(choice=("yes", "")))}, "sampling.structured_output.choice"),
    ({"ttft_slo_s": -1.0}, "slo"),
    ({"tpot_slo_s": -0.5}, "slo"),
])
def test_a_broken_rule_names_its_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidField) as raised:
        validate_generation(replace(VALID, **change))
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field}: ")


def test_the_limits_themselves_are_allowed() -> None:
    at_limits = replace(VALID, prompt_token_ids=(0,) * MAX_PROMPT_TOKENS, max_tokens=MAX_TOKENS_LIMIT,
                        sampling=SamplingParams(temperature=0.0, top_p=1.0))
    assert validate_generation(at_limits) is at_limits
    at_limits = replace(VALID, sampling=SamplingParams(temperature=2.0, stop_token_ids=(0,)))
    assert validate_generation(at_limits) is at_limits
    at_limits = replace(VALID, sampling=SamplingParams(presence_penalty=-2.0, frequency_penalty=2.0, repetition_penalty=1e-3,
                                                       logprobs=MAX_LOGPROBS,
                                                       structured_output=StructuredOutput(json_schema='{"type": "object"}')))
    assert validate_generation(at_limits) is at_limits
