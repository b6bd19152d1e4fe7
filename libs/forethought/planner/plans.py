"""Model execution plans (SamuLLM section 3, Eq. 3): data parallel x tensor parallel, valid for memory.

A plan ``P = (dp, tp)`` runs ``dp`` replicas of a model, each split over ``tp`` devices, on ``dp * tp``
devices. It is valid when one replica's devices hold the model's weights and the KV cache of at least one
sequence of the model's longest length (the paper keeps weights and KV on the accelerators, no offloading).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from forethought.costmodel import CostProfile, HardwareSpec, ModelSpec, derive_profile


@dataclass(frozen=True)
class ModelNode:
    """One LLM of a job.

    Attributes:
        name: the node's name in the job's graph.
        spec: the model's shape (weights, layers, KV heads), as the cost profiles take it.
        hidden_size: ``h`` of Eq. 1 and 2 (attention FLOPs).
        max_seq_len: ``l_max``, the longest prompt plus output the model supports.
        max_output_tokens: ``y``, the job's explicit output limit; None for none.
    """

    name: str
    spec: ModelSpec
    hidden_size: int
    max_seq_len: int = 4096
    max_output_tokens: int | None = None

    @property
    def matmul_params_per_layer(self) -> float:
        """``c`` of Eq. 1 and 2: the matrix-multiplication weights of one layer (embeddings counted in)."""
        return self.spec.params / self.spec.layers

    @property
    def memory_need_bytes(self) -> float:
        """Weights plus one sequence of ``max_seq_len`` tokens of KV cache: the least any plan must hold."""
        return self.spec.weight_bytes + self.spec.kv_bytes_per_token * self.max_seq_len


MAX_DEVICES = 72
"""The most devices of one node a job may plan for: a rack-scale NVLink domain (72 GPUs) is the largest
node vLLM's tensor parallelism spans; planning 72 takes under a minute, and the search grows with the count
(100 million devices held 8 GB within a minute)."""


@dataclass(frozen=True)
class DevicePool:
    """The devices of one node: ``count`` identical accelerators of ``hardware`` (one device each).

    ``tp_efficiency``: what tensor parallelism keeps of each device's bandwidth and FLOP/s after its
    all-reduces (docs/costmodel.md uses 0.85).
    """

    hardware: HardwareSpec
    count: int
    tp_efficiency: float = 0.85

    @property
    def usable_bytes_per_device(self) -> float:
        return self.hardware.memory_bytes * self.hardware.memory_utilization


@dataclass(frozen=True, order=True)
class ExecutionPlan:
    """``(dp, tp)``: ``dp`` replicas, each tensor-parallel over ``tp`` devices."""

    dp: int
    tp: int

    @property
    def devices(self) -> int:
        return self.dp * self.tp

    def __str__(self) -> str:
        return f"dp{self.dp}xtp{self.tp}"


def tensor_parallel_degrees(devices: int) -> tuple[int, ...]:
    """Powers of two up to ``devices``, the degrees vLLM's tensor parallelism takes on one node."""
    degrees, tp = [], 1
    while tp <= devices:
        degrees.append(tp)
        tp *= 2
    return tuple(degrees)


def fits(model: ModelNode, pool: DevicePool, tp: int) -> bool:
    """Whether ``tp`` devices hold the model's weights and one longest sequence's KV cache."""
    return model.memory_need_bytes <= pool.usable_bytes_per_device * tp


def valid_plans(model: ModelNode, pool: DevicePool, devices: int | None = None) -> tuple[ExecutionPlan, ...]:
    """Every memory-valid plan on at most ``devices`` (default: the whole pool), by (dp, tp)."""
    limit = pool.count if devices is None else devices
    plans = [
        ExecutionPlan(dp, tp)
        for tp in tensor_parallel_degrees(limit)
        if fits(model, pool, tp)
        for dp in range(1, limit // tp + 1)
    ]
    return tuple(sorted(plans))


def replica_profile(model: ModelNode, pool: DevicePool, tp: int) -> CostProfile:
    """The cost profile of one replica on ``tp`` devices (docs/costmodel.md's derivation, per degree)."""
    hardware = replace(
        pool.hardware,
        name=f"{tp}x {pool.hardware.name}" if tp > 1 else pool.hardware.name,
        devices=tp,
        tp_efficiency=pool.tp_efficiency if tp > 1 else 1.0,
        kv_cache_bytes=None,
    )
    return derive_profile(f"{model.name}-tp{tp}", model.spec, hardware)
