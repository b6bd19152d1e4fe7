"""The engine's dtype: float32 on a CPU, vLLM's own choice on a GPU, an explicit dtype as asked."""

from __future__ import annotations

import pytest
from forethought.backends.vllm.cpu_dtype import choose_dtype, resolve_dtype


@pytest.mark.parametrize(("on_cpu", "expected"), [
    pytest.param(True, "float32", id="cpu"),
    pytest.param(False, "auto", id="gpu-host-keeps-vllm-choice"),
])
def test_choose_dtype(on_cpu: bool, expected: str) -> None:
    assert choose_dtype(on_cpu) == expected


@pytest.mark.parametrize(("requested", "on_cpu", "expected"), [
    pytest.param("auto", True, "float32", id="auto-cpu"),
    pytest.param("auto", False, "auto", id="auto-gpu"),
    pytest.param("bfloat16", True, "bfloat16", id="explicit-wins-on-cpu"),
    pytest.param("float16", False, "float16", id="explicit-wins-on-gpu"),
])
def test_resolve_dtype(requested: str, on_cpu: bool, expected: str) -> None:
    assert resolve_dtype(requested, on_cpu) == expected
