"""Execution plans: (dp, tp) on powers-of-two tensor-parallel degrees, valid when one replica holds the
weights and one longest sequence's KV cache."""

from __future__ import annotations

from forethought.costmodel import derive_profile
from forethought.costmodel.registry import A100_80GB
from forethought.planner import ExecutionPlan, replica_profile, valid_plans
from forethought.planner.plans import fits, tensor_parallel_degrees

from .conftest import make_model, make_pool


def plans(*pairs: tuple[int, int]) -> tuple[ExecutionPlan, ...]:
    return tuple(ExecutionPlan(dp, tp) for dp, tp in pairs)


def test_tensor_parallel_degrees_are_powers_of_two() -> None:
    assert tensor_parallel_degrees(8) == (1, 2, 4, 8)
    assert tensor_parallel_degrees(6) == (1, 2, 4)
    assert tensor_parallel_degrees(1) == (1,)


def test_a_7b_model_runs_on_every_split_of_four_devices() -> None:
    assert valid_plans(make_model("m"), make_pool(4)) == plans(
        (1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (3, 1), (4, 1))


def test_a_70b_model_needs_two_devices_a_replica() -> None:
    big = make_model("big", "70b")
    assert not fits(big, make_pool(4), 1)
    assert valid_plans(big, make_pool(4)) == plans((1, 2), (1, 4), (2, 2))
    assert valid_plans(big, make_pool(4), devices=3) == plans((1, 2))


def test_the_memory_need_counts_one_longest_sequence() -> None:
    model = make_model("m", max_seq_len=4096)
    assert model.memory_need_bytes == 6.74e9 * 2 + 524_288 * 4096
    assert str(ExecutionPlan(2, 4)) == "dp2xtp4"
    assert ExecutionPlan(2, 4).devices == 8


def test_a_replica_profile_is_the_cost_models_derivation_per_degree() -> None:
    model = make_model("m")
    one = replica_profile(model, make_pool(), 1)
    assert one.kv_capacity_tokens == derive_profile("x", model.spec, A100_80GB).kv_capacity_tokens
    two = replica_profile(model, make_pool(), 2)
    assert two.kv_capacity_tokens == int((2 * 80e9 * 0.9 - 2 * 6.74e9) // 524_288)
    assert two.prefill_token_s == one.prefill_token_s / (2 * 0.85)
