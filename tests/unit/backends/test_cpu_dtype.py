"""The engine's dtype: float32 on a CPU, vLLM's own choice on a GPU, an explicit dtype as asked."""

from __future__ import annotations

import pytest
from forethought.backends.vllm.cpu_dtype import resolve_dtype


@pytest.mark.parametrize(("requested", "on_cpu", "expected"), [
    pytest.param("auto", True, "float32", id="auto-cpu"),
    pytest.param("auto", False, "auto", id="auto-gpu-keeps-vllm-choice"),
    pytest.param("bfloat16", True, "bfloat16", id="explicit-wins-on-cpu"),
    pytest.param("float16", False, "float16", id="explicit-wins-on-gpu"),
])
def test_resolve_dtype(requested: str, on_cpu: bool, expected: str) -> None:
    assert resolve_dtype(requested, on_cpu) == expected
