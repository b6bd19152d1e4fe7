"""From ``VllmEngineOptions`` to what vLLM is started with: threads, environment, dtype (no engine)."""

from __future__ import annotations

from pathlib import Path

import pytest
from forethought.backends.vllm.backend import (
    VllmEngineOptions,
    compute_threads,
    engine_args,
    start_environment,
)


@pytest.mark.parametrize(
    ("requested", "usable_cpus", "expected"),
    [
        pytest.param(0, 2, 1, id="two-cpus-keep-one-for-the-front-end"),
        pytest.param(0, 16, 15, id="sixteen-cpus"),
        pytest.param(0, 1, 1, id="one-cpu-still-one-thread"),
        pytest.param(2, 2, 2, id="explicit-count-wins"),
    ],
)
def test_compute_threads(requested: int, usable_cpus: int, expected: int) -> None:
    assert compute_threads(requested, usable_cpus) == expected


@pytest.mark.parametrize(
    ("options", "on_cpu", "expected"),
    [
        pytest.param(
            VllmEngineOptions(), True,
            {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1"},
            id="cpu-uni-default",
        ),
        pytest.param(
            VllmEngineOptions(cpu_threads=2, engine_env={"VLLM_CPU_ATTN_SPLIT_KV": "0"}), True,
            {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "2", "VLLM_CPU_ATTN_SPLIT_KV": "0"},
            id="cpu-uni-threads-and-extra-env",
        ),
        pytest.param(
            VllmEngineOptions(engine_env={"OMP_NUM_THREADS": "3"}), True,
            {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "3"},
            id="engine-env-wins",
        ),
        pytest.param(
            VllmEngineOptions(executor="mp", engine_env={"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}), True,
            {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"},
            id="cpu-mp-binds-its-own-threads",
        ),
        pytest.param(VllmEngineOptions(), False, {}, id="gpu-needs-nothing"),
    ],
)
def test_start_environment(options: VllmEngineOptions, on_cpu: bool, expected: dict[str, str]) -> None:
    assert start_environment(options, on_cpu, usable_cpus=2) == expected


def test_engine_args_carry_the_resolved_dtype_and_executor() -> None:
    args = engine_args(VllmEngineOptions(), Path("/models/smol"), "float32", "ipc:///tmp/kv")

    assert (args.dtype, args.distributed_executor_backend, args.block_size) == ("float32", "uni", 32)
