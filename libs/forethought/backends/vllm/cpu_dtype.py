"""The vLLM engine's compute dtype from what the processor can do (docs/vllm.md, "Data type").

On a CPU, bfloat16 pays only where the processor computes in it natively (AVX-512 BF16, AMX, Arm
BF16): elsewhere every bf16 matrix product converts to float32 and back, and oneDNN builds no bf16
matmul for AVX2, so vLLM falls back to torch's slow bf16 path. Half the weight bytes does not make up
for that. On a GPU the choice stays vLLM's own (``"auto"``: the checkpoint's dtype).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

AUTO = "auto"
"""Resolve at engine start: by CPU flags on a CPU, vLLM's own choice on a GPU."""

NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
"""``/proc/cpuinfo`` flags of bf16 arithmetic in hardware (x86 AVX-512 BF16 and AMX; Arm's FEAT_BF16)."""

_FLAG_KEYS = ("flags", "features")
"""x86 lists its flags under ``flags``, Arm under ``Features``."""


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The feature flags of the first processor listed in ``/proc/cpuinfo`` text (lower case)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in _FLAG_KEYS:
            return frozenset(value.lower().split())
    return frozenset()


def read_cpu_flags(cpuinfo_path: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """This machine's CPU flags; empty where ``/proc/cpuinfo`` does not exist (macOS)."""
    try:
        return cpu_flags(cpuinfo_path.read_text())
    except OSError:
        return frozenset()


def choose_dtype(flags: Collection[str], on_cpu: bool) -> str:
    """``"bfloat16"`` on a CPU with native bf16, ``"float32"`` on any other CPU, ``"auto"`` off the CPU."""
    if not on_cpu:
        return AUTO
    return "bfloat16" if NATIVE_BF16_FLAGS & set(flags) else "float32"


def resolve_dtype(requested: str, flags: Collection[str], on_cpu: bool) -> str:
    """``requested`` unchanged unless it is ``"auto"``, which becomes ``choose_dtype(flags, on_cpu)``."""
    return choose_dtype(flags, on_cpu) if requested == AUTO else requested
