"""A run's state in the application simulator: which step it is in, the service it has received, its
waiting requests and its backends' warmth. What scheduling orders read (``order.py``)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from forethought.appsim.engine import LlmRequest
from forethought.appsim.workload import AppRun
from forethought.demand import RunPosition, UnitExecution

BackendKey = tuple[str, str]
"""What is warmed: ("lora", adapter) or ("tool", kind)."""


@dataclass
class RunState:
    """A run in progress. ``step_demand_s`` is each step's true service demand (alone seconds of its LLM
    requests, or a tool's seconds), which only the oracle reads."""

    run: AppRun
    step_demand_s: tuple[float, ...]
    step: int = -1
    step_started_s: float = 0.0
    attained_step_s: float = 0.0
    attained_llm_s: float = 0.0
    outstanding: int = 0
    waiting: deque[LlmRequest] = field(default_factory=deque)
    warm: set[BackendKey] = field(default_factory=set)
    prewarming: dict[BackendKey, tuple[float, float]] = field(default_factory=dict)  # key -> (started, ready)
    finished_s: float | None = None

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def current(self) -> UnitExecution:
        return self.run.steps[self.step]

    @property
    def position(self) -> RunPosition:
        """Where the run stands, as the demand estimator reads it: the prompt of an LLM step is known."""
        upstream = self.run.steps[self.step - 1] if self.step > 0 else None
        return RunPosition(self.current.unit, upstream, self.current.consumption.input_tokens or None)

    @property
    def true_remaining_s(self) -> float:
        return sum(self.step_demand_s[self.step:]) - self.attained_step_s
