"""The named profiles (BROS section 4.1 cost models) and ``get_profile``; sources in docs/costmodel.md."""

from __future__ import annotations

from dataclasses import replace

from forethought.costmodel.profiles import (
    CostProfile,
    HardwareSpec,
    ModelSpec,
    derive_profile,
)

GIB = 1024**3

SMOLLM2_135M = ModelSpec("SmolLM2-135M", params=134.5e6, layers=30, kv_heads=3, head_dim=64,
                         bytes_per_param=4)
LLAMA_7B = ModelSpec("Llama-2-7B", params=6.74e9, layers=32, kv_heads=32, head_dim=128)
LLAMA_13B = ModelSpec("Llama-2-13B", params=13.0e9, layers=40, kv_heads=40, head_dim=128)
LLAMA_70B = ModelSpec("Llama-3-70B", params=70.6e9, layers=80, kv_heads=8, head_dim=128)

CPU_2_CORES = HardwareSpec(
    "2-core x86 CPU (AVX2, 2 FMA/cycle, 2.5 GHz, DDR4)",
    peak_flops=2 * 32 * 2.5e9,
    memory_bandwidth=20e9,
    host_link_bandwidth=10e9,
    memory_bytes=24 * GIB,
    compute_efficiency=0.3,
    bandwidth_efficiency=0.6,
    iteration_overhead_s=5e-3,
    per_request_s=0.5e-3,
    swap_setup_s=0.1e-3,
    kv_cache_bytes=1 * GIB,
)
A100_80GB = HardwareSpec(
    "NVIDIA A100-SXM4-80GB",
    peak_flops=312e12,
    memory_bandwidth=2.039e12,
    host_link_bandwidth=25e9,
    memory_bytes=80e9,
    compute_efficiency=0.5,
    bandwidth_efficiency=0.65,
    iteration_overhead_s=2e-3,
    per_request_s=0.05e-3,
    swap_setup_s=0.05e-3,
)
H100_80GB = replace(
    A100_80GB,
    name="NVIDIA H100-SXM5-80GB",
    peak_flops=989e12,
    memory_bandwidth=3.35e12,
    host_link_bandwidth=50e9,
    compute_efficiency=0.4,
)


def _tp4(hardware: HardwareSpec) -> HardwareSpec:
    return replace(hardware, name=f"4x {hardware.name}, tensor parallel", devices=4, tp_efficiency=0.85)


PROFILES: dict[str, CostProfile] = {
    profile.name: profile
    for profile in (
        derive_profile("smollm2-135m-cpu2", SMOLLM2_135M, CPU_2_CORES),
        derive_profile("llama-7b-a100", LLAMA_7B, A100_80GB),
        derive_profile("llama-7b-h100", LLAMA_7B, H100_80GB),
        derive_profile("llama-13b-a100", LLAMA_13B, A100_80GB),
        derive_profile("llama-13b-h100", LLAMA_13B, H100_80GB),
        derive_profile("llama-70b-a100-tp4", LLAMA_70B, _tp4(A100_80GB)),
        derive_profile("llama-70b-h100-tp4", LLAMA_70B, _tp4(H100_80GB)),
    )
}


def get_profile(name: str) -> CostProfile:
    """The profile called ``name``; KeyError names the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown cost profile {name!r}; known: {', '.join(sorted(PROFILES))}") from None


def profile_names() -> tuple[str, ...]:
    return tuple(sorted(PROFILES))
