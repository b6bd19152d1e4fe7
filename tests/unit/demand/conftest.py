"""Small factories for demand tests: backends, units, graphs and runs with exact, readable values."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from forethought.demand import (
    BackendKind,
    BackendSpec,
    Consumption,
    FunctionalUnit,
    PDGraph,
    UnitExecution,
)

LLM = BackendSpec(BackendKind.LLM, model="llama-2-7b")
SANDBOX = BackendSpec(BackendKind.TOOL, tool="python-sandbox")


def make_unit(name: str, next_units: Mapping[str, float] | None = None, backend: BackendSpec = LLM) -> FunctionalUnit:
    return FunctionalUnit(name, backend, dict(next_units or {}))


def llm_step(unit: str, input_tokens: int = 100, output_tokens: int = 10, parallelism: int = 1) -> UnitExecution:
    return UnitExecution(unit, Consumption(input_tokens, output_tokens, parallelism))


def tool_step(unit: str, seconds: float) -> UnitExecution:
    return UnitExecution(unit, Consumption(tool_duration_s=seconds))


def code_generation_graph() -> PDGraph:
    """write -> test; test ends (prior 0.5) or loops back through fix -> test."""
    return PDGraph(
        "code_generation",
        [
            make_unit("write", {"test": 1.0}),
            make_unit("test", {"end": 0.5, "fix": 0.5}, SANDBOX),
            make_unit("fix", {"test": 1.0}),
        ],
    )


@pytest.fixture
def graph() -> PDGraph:
    return code_generation_graph()
