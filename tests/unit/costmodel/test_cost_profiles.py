"""Cost profiles: the registry, the roofline arithmetic behind each coefficient, and swap overlap."""

from __future__ import annotations

import pytest
from forethought.costmodel import CostModelExecutor, get_profile, profile_names
from forethought.costmodel.registry import A100_80GB, LLAMA_7B, SMOLLM2_135M
from forethought.engine.executor import BatchShape, Executor, IterationEstimator

NAMES = (
    "llama-13b-a100", "llama-13b-h100", "llama-70b-a100-tp4", "llama-70b-h100-tp4",
    "llama-7b-a100", "llama-7b-h100", "smollm2-135m-cpu2",
)


def test_registry_lists_every_named_profile() -> None:
    assert profile_names() == NAMES
    with pytest.raises(KeyError, match="known: llama-13b-a100"):
        get_profile("gpt-5-tpu")


def test_7b_on_a100_coefficients_follow_from_the_datasheet() -> None:
    profile = get_profile("llama-7b-a100")
    bandwidth = A100_80GB.memory_bandwidth * A100_80GB.bandwidth_efficiency
    assert profile.weight_read_s == pytest.approx(2 * 6.74e9 / bandwidth)
    assert profile.prefill_token_s == pytest.approx(2 * 6.74e9 / (312e12 * 0.5))
    assert LLAMA_7B.kv_bytes_per_token == 524_288
    assert SMOLLM2_135M.kv_bytes_per_token == 46_080
    assert profile.kv_capacity_tokens == int((80e9 * 0.9 - 2 * 6.74e9) // 524_288)


@pytest.mark.parametrize("name", NAMES)
def test_latency_grows_with_every_input(name: str) -> None:
    profile = get_profile(name)
    assert profile.prefill_time(1024) > profile.prefill_time(512) > 0
    assert profile.decode_time(64, 64 * 1024) > profile.decode_time(8, 8 * 1024) > 0
    assert profile.iteration_time(BatchShape()) == 0.0
    assert profile.prefill_time(0) == profile.decode_time(0, 0) == 0.0


def test_h100_is_faster_than_a100_and_bigger_models_are_slower() -> None:
    for size in ("7b", "13b"):
        assert get_profile(f"llama-{size}-h100").prefill_time(2048) < get_profile(f"llama-{size}-a100").prefill_time(2048)
    assert get_profile("llama-13b-a100").decode_time(1, 512) > get_profile("llama-7b-a100").decode_time(1, 512)


def test_swap_overlaps_with_compute() -> None:
    profile = get_profile("llama-7b-a100")
    compute = BatchShape(decode_requests=4, decode_context_tokens=4000)
    small_swap = BatchShape(decode_requests=4, decode_context_tokens=4000, swap_in_slots=10)
    huge_swap = BatchShape(decode_requests=4, decode_context_tokens=4000, swap_in_slots=100_000)
    assert profile.iteration_time(small_swap) == profile.iteration_time(compute)
    assert profile.iteration_time(huge_swap) == pytest.approx(profile.swap_time(100_000))


def test_executor_is_an_estimating_executor() -> None:
    executor = CostModelExecutor(get_profile("smollm2-135m-cpu2"))
    assert isinstance(executor, Executor) and isinstance(executor, IterationEstimator)
    shape = BatchShape(prefill_tokens=100, prefill_requests=1)
    assert executor.iteration_time(shape) == executor.estimate_iteration_time(shape) > 0
