"""The cost model's seconds of an LLM unit: one batched prefill, then a decode iteration per further token."""

from __future__ import annotations

import pytest
from forethought.costmodel import PROFILES
from forethought.demand import BackendKind, BackendSpec, Consumption
from forethought.services.demand.seconds import CostModelSeconds

LLAMA_7B = BackendSpec(BackendKind.LLM, model="Llama-2-7B")
LLAMA_13B = BackendSpec(BackendKind.LLM, model="Llama-2-13B")
UNKNOWN = BackendSpec(BackendKind.LLM, model="Mistral-7B", lora_adapter="x")


def iteration_by_iteration(profile, consumption: Consumption) -> float:
    parallel, prompt, output = consumption.parallelism, consumption.input_tokens, consumption.output_tokens
    seconds = profile.prefill_time(parallel * prompt)
    for generated in range(1, output):
        seconds += profile.decode_time(parallel, parallel * (prompt + generated))
    return seconds


@pytest.mark.parametrize(
    ("backend", "consumption", "profile"),
    [
        pytest.param(LLAMA_7B, Consumption(900, 540), "llama-7b-a100", id="7b-one-request"),
        pytest.param(LLAMA_7B, Consumption(300, 80, parallelism=40), "llama-7b-a100", id="7b-40-parallel"),
        pytest.param(LLAMA_13B, Consumption(1200, 300, parallelism=3), "llama-13b-a100", id="13b-on-its-own-profile"),
        pytest.param(UNKNOWN, Consumption(500, 100), "llama-7b-a100", id="unknown-model-on-the-default"),
        pytest.param(LLAMA_7B, Consumption(700, 1), "llama-7b-a100", id="prefill-only"),
    ],
)
def test_seconds_match_the_iterations_summed_one_by_one(backend, consumption, profile):
    seconds = CostModelSeconds(PROFILES["llama-7b-a100"], PROFILES)
    assert seconds.profile_for(backend.model).name == profile
    expected = iteration_by_iteration(PROFILES[profile], consumption)
    assert seconds(backend, consumption) == pytest.approx(expected, rel=1e-6)


def test_no_tokens_cost_nothing():
    assert CostModelSeconds(PROFILES["llama-7b-h100"], PROFILES)(LLAMA_7B, Consumption(0, 0)) == 0.0
