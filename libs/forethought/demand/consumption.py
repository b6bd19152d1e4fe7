"""What one execution of a functional unit consumed: PDGraph's backend-consumption (Hermes section 3.2).

An LLM unit is recorded by its input and output lengths and its request parallelism, not by seconds, so
one profile serves any hardware; a tool unit by the seconds it ran. Each recorded execution keeps the
consumption of the unit that led to it in the same run, which is what online refinement joins on.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from forethought.demand.schema import integer, mapping, no_unknown_keys, number
from forethought.domain import require


class DemandVariable(enum.Enum):
    """A recorded demand variable of an LLM unit; the refinement correlates these across units."""

    INPUT = "input_tokens"
    OUTPUT = "output_tokens"
    PARALLELISM = "parallelism"


@dataclass(frozen=True)
class Consumption:
    """One execution of a unit: tokens per request, parallel requests, and a tool's run time.

    ``input_tokens`` and ``output_tokens`` are per request (the mean when the parallel requests differ);
    ``tool_duration_s`` is the wall time of a tool unit's execution, 0 for an LLM unit.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    parallelism: int = 1
    tool_duration_s: float = 0.0

    def value(self, variable: DemandVariable) -> int:
        return int(getattr(self, variable.value))

    def validate(self, field: str) -> None:
        """Raises InvalidField naming ``field``'s part that breaks a rule."""
        require(self.input_tokens >= 0, f"{field}.input_tokens", "must be >= 0")
        require(self.output_tokens >= 0, f"{field}.output_tokens", "must be >= 0")
        require(self.parallelism >= 1, f"{field}.parallelism", "must be >= 1")
        require(self.tool_duration_s >= 0, f"{field}.tool_duration_s", "must be >= 0")

    def to_dict(self) -> dict[str, float]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "parallelism": self.parallelism,
            "tool_duration_s": self.tool_duration_s,
        }

    @classmethod
    def from_dict(cls, value: object, field: str) -> Consumption:
        """Reads the form ``to_dict`` writes; missing keys take their defaults."""
        data = mapping(value, field)
        no_unknown_keys(data, {"input_tokens", "output_tokens", "parallelism", "tool_duration_s"}, field)
        consumption = cls(
            input_tokens=integer(data.get("input_tokens", 0), f"{field}.input_tokens"),
            output_tokens=integer(data.get("output_tokens", 0), f"{field}.output_tokens"),
            parallelism=integer(data.get("parallelism", 1), f"{field}.parallelism"),
            tool_duration_s=number(data.get("tool_duration_s", 0.0), f"{field}.tool_duration_s"),
        )
        consumption.validate(field)
        return consumption


@dataclass(frozen=True)
class UnitExecution:
    """One step of a finished run: which unit ran and what it consumed."""

    unit: str
    consumption: Consumption


@dataclass(frozen=True)
class Observation:
    """A recorded execution of a unit, with the execution that led to it (None for a run's first unit)."""

    consumption: Consumption
    upstream: UnitExecution | None = None
