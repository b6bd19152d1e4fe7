"""The engine's dtype from CPU flags: bfloat16 only with native bf16, float32 on other CPUs."""

from __future__ import annotations

from pathlib import Path

import pytest
from forethought.backends.vllm.cpu_dtype import (
    choose_dtype,
    cpu_flags,
    read_cpu_flags,
    resolve_dtype,
)

AVX2_EPYC = "fpu sse sse2 fma avx f16c avx2 bmi2 vaes"
AVX512_NO_BF16 = f"{AVX2_EPYC} avx512f avx512bw avx512vl avx512_vnni"
SAPPHIRE_RAPIDS = f"{AVX512_NO_BF16} avx512_bf16 amx_bf16 amx_tile amx_int8"
ZEN4 = f"{AVX512_NO_BF16} avx512_bf16"
AMX_ONLY = f"{AVX2_EPYC} amx_tile amx_bf16"
NEOVERSE_V1 = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp sve bf16 i8mm"
NEOVERSE_N1 = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp"


@pytest.mark.parametrize(
    ("flags", "on_cpu", "expected"),
    [
        pytest.param(AVX2_EPYC, True, "float32", id="avx2-only"),
        pytest.param(AVX512_NO_BF16, True, "float32", id="avx512-without-bf16"),
        pytest.param(ZEN4, True, "bfloat16", id="avx512-bf16"),
        pytest.param(SAPPHIRE_RAPIDS, True, "bfloat16", id="amx-and-avx512-bf16"),
        pytest.param(AMX_ONLY, True, "bfloat16", id="amx-bf16"),
        pytest.param(NEOVERSE_V1, True, "bfloat16", id="arm-bf16"),
        pytest.param(NEOVERSE_N1, True, "float32", id="arm-without-bf16"),
        pytest.param("", True, "float32", id="unknown-cpu"),
        pytest.param(AVX2_EPYC, False, "auto", id="gpu-host-keeps-vllm-choice"),
        pytest.param(SAPPHIRE_RAPIDS, False, "auto", id="gpu-host-with-amx"),
    ],
)
def test_choose_dtype(flags: str, on_cpu: bool, expected: str) -> None:
    assert choose_dtype(flags.split(), on_cpu) == expected


@pytest.mark.parametrize(
    ("requested", "flags", "on_cpu", "expected"),
    [
        pytest.param("auto", AVX2_EPYC, True, "float32", id="auto-avx2"),
        pytest.param("auto", SAPPHIRE_RAPIDS, True, "bfloat16", id="auto-amx"),
        pytest.param("auto", AVX2_EPYC, False, "auto", id="auto-gpu"),
        pytest.param("bfloat16", AVX2_EPYC, True, "bfloat16", id="explicit-wins-on-cpu"),
        pytest.param("float16", SAPPHIRE_RAPIDS, False, "float16", id="explicit-wins-on-gpu"),
    ],
)
def test_resolve_dtype(requested: str, flags: str, on_cpu: bool, expected: str) -> None:
    assert resolve_dtype(requested, flags.split(), on_cpu) == expected


@pytest.mark.parametrize(
    ("cpuinfo", "expected"),
    [
        pytest.param(
            "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu AVX2 fma\n\nprocessor\t: 1\n"
            "flags\t\t: other\n",
            frozenset({"fpu", "avx2", "fma"}),
            id="x86-first-processor-lower-cased",
        ),
        pytest.param(
            "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd bf16\n",
            frozenset({"fp", "asimd", "bf16"}),
            id="arm-features",
        ),
        pytest.param("processor\t: 0\nmodel name\t: something\n", frozenset(), id="no-flags-line"),
    ],
)
def test_cpu_flags(cpuinfo: str, expected: frozenset[str]) -> None:
    assert cpu_flags(cpuinfo) == expected


def test_read_cpu_flags_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_cpu_flags(tmp_path / "cpuinfo") == frozenset()
