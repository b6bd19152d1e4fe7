"""Named latency profiles: linear iteration-time models derived from FLOPs and memory bandwidth
(BROS section 4.1, "inference cost modeling"; SamuLLM's linear per-iteration models).

An iteration reads the weights once, computes ``2 * params`` FLOPs per new token, reads the KV cache of
every context token, and copies checkpointed KV slots over the host link, overlapped with compute::

    compute = overhead + weight_read + prefill_token * P + decode_request * D + kv_read_token * C
    iteration = max(compute, swap_base + swap_slot * S)

Every coefficient comes from a ``ModelSpec`` and a ``HardwareSpec`` (published datasheet figures) and a
stated efficiency; docs/costmodel.md shows the arithmetic and the sources.
"""

from __future__ import annotations

from dataclasses import dataclass

from forethought.engine.executor import BatchShape


@dataclass(frozen=True)
class ModelSpec:
    """Shape of a decoder-only model: what weight reads, FLOPs and KV bytes follow from."""

    name: str
    params: float
    layers: int
    kv_heads: int
    head_dim: int
    bytes_per_param: int = 2

    @property
    def weight_bytes(self) -> float:
        return self.params * self.bytes_per_param

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V, every layer, every KV head, in the weights' precision."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_param


@dataclass(frozen=True)
class HardwareSpec:
    """One accelerator (or CPU socket share) with the efficiencies inference reaches on it.

    ``compute_efficiency`` is the model-FLOPs utilisation of prefill; ``bandwidth_efficiency`` the share of
    peak memory bandwidth a decode step reaches; ``tp_efficiency`` what tensor parallelism keeps after its
    all-reduces.
    """

    name: str
    peak_flops: float
    memory_bandwidth: float
    host_link_bandwidth: float
    memory_bytes: float
    compute_efficiency: float
    bandwidth_efficiency: float
    iteration_overhead_s: float
    per_request_s: float
    swap_setup_s: float
    devices: int = 1
    tp_efficiency: float = 1.0
    kv_cache_bytes: float | None = None
    memory_utilization: float = 0.9


@dataclass(frozen=True)
class CostProfile:
    """Linear latency coefficients (seconds) of one model on one machine; all methods are pure."""

    name: str
    model: ModelSpec
    hardware: HardwareSpec
    overhead_s: float
    weight_read_s: float
    prefill_token_s: float
    decode_request_s: float
    kv_read_token_s: float
    swap_base_s: float
    swap_slot_s: float
    kv_capacity_tokens: int

    def prefill_time(self, tokens: int, context_tokens: int = 0) -> float:
        """One iteration that prefills ``tokens`` new tokens attending to ``context_tokens`` cached ones;
        no tokens, no time (what a router's load cost wants)."""
        if tokens <= 0:
            return 0.0
        return self.iteration_time(
            BatchShape(prefill_tokens=tokens, prefill_requests=1, prefill_context_tokens=context_tokens)
        )

    def decode_time(self, batch: int, context: int) -> float:
        """One decode iteration of ``batch`` requests holding ``context`` tokens in all; 0 for no batch."""
        return self.iteration_time(BatchShape(decode_requests=max(0, batch), decode_context_tokens=context))

    def swap_time(self, slots: int) -> float:
        return self.swap_base_s + self.swap_slot_s * slots if slots > 0 else 0.0

    def iteration_time(self, batch: BatchShape) -> float:
        """Modelled seconds of one iteration; 0 for an empty batch."""
        if batch.is_empty:
            return 0.0
        compute = (
            self.overhead_s
            + self.weight_read_s
            + self.prefill_token_s * batch.prefill_tokens
            + self.decode_request_s * batch.decode_requests
            + self.kv_read_token_s * (batch.decode_context_tokens + batch.prefill_context_tokens)
        )
        # BROS overlaps the host<->GPU copies with the model's execution.
        return max(compute, self.swap_time(batch.swap_in_slots + batch.swap_out_slots))


def derive_profile(name: str, model: ModelSpec, hardware: HardwareSpec) -> CostProfile:
    """Coefficients from roofline arithmetic: weights over bandwidth, FLOPs over achieved FLOP/s."""
    scale = hardware.devices * hardware.tp_efficiency
    bandwidth = hardware.memory_bandwidth * hardware.bandwidth_efficiency * scale
    flops = hardware.peak_flops * hardware.compute_efficiency * scale
    if hardware.kv_cache_bytes is not None:
        kv_bytes = hardware.kv_cache_bytes
    else:
        kv_bytes = hardware.memory_bytes * hardware.devices * hardware.memory_utilization
        kv_bytes -= model.weight_bytes
    if kv_bytes <= 0:
        raise ValueError(f"{model.name} does not fit on {hardware.name}")
    return CostProfile(
        name=name,
        model=model,
        hardware=hardware,
        overhead_s=hardware.iteration_overhead_s,
        weight_read_s=model.weight_bytes / bandwidth,
        prefill_token_s=2 * model.params / flops,
        decode_request_s=hardware.per_request_s,
        kv_read_token_s=model.kv_bytes_per_token / bandwidth,
        swap_base_s=hardware.swap_setup_s,
        swap_slot_s=model.kv_bytes_per_token / (hardware.host_link_bandwidth * hardware.devices),
        kv_capacity_tokens=int(kv_bytes // model.kv_bytes_per_token),
    )
