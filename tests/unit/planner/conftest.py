"""Small factories for the planner's tests: models on A100s, a fixed-time executor, a counting clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from forethought.costmodel.registry import A100_80GB, LLAMA_7B, LLAMA_13B, LLAMA_70B
from forethought.engine.executor import BatchShape
from forethought.planner import DevicePool, ModelNode, OutputLengthCDF

SPECS = {"7b": (LLAMA_7B, 4096), "13b": (LLAMA_13B, 5120), "70b": (LLAMA_70B, 8192)}


def make_model(name: str, size: str = "7b", max_seq_len: int = 4096, max_output_tokens: int | None = None) -> ModelNode:
    spec, hidden = SPECS[size]
    return ModelNode(name, spec, hidden, max_seq_len, max_output_tokens)


def make_pool(count: int = 4) -> DevicePool:
    return DevicePool(A100_80GB, count)


class FixedExecutor:
    """Every non-empty iteration takes ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def iteration_time(self, batch: BatchShape) -> float:
        return 0.0 if batch.is_empty else self.seconds


def fixed_executors(seconds: float = 1.0, scaling: Callable[[int], float] = lambda tp: 1.0 / tp):
    """An executor factory: ``seconds * scaling(tp)`` per iteration."""
    return lambda model, tp: FixedExecutor(seconds * scaling(tp))


class CountingClock:
    """Reads 0, 1, 2, ... seconds."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return float(self.reads - 1)


@pytest.fixture(name="uniform_cdf")
def uniform_cdf_fixture() -> OutputLengthCDF:
    return OutputLengthCDF.from_observations(range(20, 120))
