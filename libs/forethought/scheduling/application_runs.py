"""Application runs at the front door (Hermes sections 3.1 and 4): the step each run is in, what its
finished steps consumed, and its application completion time (ACT).

A run's LLM steps arrive as requests naming the run and the step. Requests of one *execution* of a
step run in parallel. A request that names its execution (its position in the run) joins that execution
whenever it arrives, or begins the next one. A request that does not joins the execution of its step
while any of its requests is still in flight; once nothing is, it begins the next execution (a loop back
to the same step included), so a parallel request that reaches the scheduler after its siblings ended
would be taken for a loop. A request for another step while requests are still in flight is out of
order. A tool step is reported whole, with its measured duration. Each execution is *closed* when the
next one begins or the run finishes: that is when it is final and the demand graph may learn it. Pure:
time comes in as ``now``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from forethought.domain import require

MAX_RUN_STEPS = 10_000
"""Step executions one run may hold: a run is kept whole until it finishes (its executions and events), so a
client looping without end would otherwise grow it, and the demand service's estimates, without bound."""


class StepState(enum.Enum):
    QUEUED = "queued"  # its first request waits for a worker
    RUNNING = "running"  # a request of it streams tokens
    DONE = "done"  # nothing of it is in flight
    FAILED = "failed"  # a request of it failed or was abandoned


class StepKind(enum.Enum):
    LLM = "llm"
    TOOL = "tool"


@dataclass
class StepExecution:
    """One execution of a step: its requests (an LLM step) or its reported duration (a tool step)."""

    step: str
    kind: StepKind
    index: int  # its position in the run, from 0
    started_s: float
    finished_s: float | None = None
    in_flight: int = 0
    requests: int = 0
    input_tokens: int = 0  # summed over its requests
    output_tokens: int = 0
    state: StepState = StepState.QUEUED
    closed: bool = False

    @property
    def service_s(self) -> float:
        """Wall time from its first request's arrival to its last one's end (a tool step: its duration)."""
        return max(0.0, (self.finished_s if self.finished_s is not None else self.started_s) - self.started_s)

    @property
    def parallelism(self) -> int:
        return max(1, self.requests)

    def mean_tokens(self, total: int) -> int:
        """Tokens per request, as the demand graph records them."""
        return round(total / self.parallelism)


@dataclass(frozen=True)
class RunEvent:
    """A change a watcher sees: a step's state, or the run's end (``step`` empty)."""

    step: str
    index: int
    state: StepState
    at_s: float


@dataclass
class ApplicationRun:
    """One run of a registered application, from submission to its finish."""

    run_id: str
    application: str
    submitted_s: float
    deadline_s: float = 0.0  # absolute; 0 = none
    executions: list[StepExecution] = field(default_factory=list)
    finished_s: float | None = None
    failed: bool = False
    events: list[RunEvent] = field(default_factory=list)

    @property
    def current(self) -> StepExecution | None:
        return self.executions[-1] if self.executions else None

    @property
    def finished(self) -> bool:
        return self.finished_s is not None

    @property
    def act_s(self) -> float | None:
        """Application completion time: submission to finish (Hermes section 5)."""
        return None if self.finished_s is None else self.finished_s - self.submitted_s

    def done_steps(self) -> list[str]:
        """The closed executions' steps, first to last: what the demand graph has learnt of this run."""
        return [execution.step for execution in self.executions if execution.closed]

    def attained_s(self, now: float) -> float:
        """Service the current execution has received so far: the attained service of Gittins's Eq. 1."""
        current = self.current
        if current is None or current.state is StepState.DONE:
            return 0.0
        return max(0.0, now - current.started_s)

    def last_activity_s(self) -> float:
        """When the run last changed: its latest event, else its submission."""
        return self.events[-1].at_s if self.events else self.submitted_s

    def deadline_in_s(self, now: float) -> float:
        """Seconds until the deadline (0 = none; a passed deadline counts as a tiny positive slack)."""
        return 0.0 if self.deadline_s <= 0 else max(1e-9, self.deadline_s - now)

    def joins(self, step: str, execution: int | None = None) -> bool:
        """Whether a request of ``step`` (of the execution at position ``execution`` when given) joins the
        current execution rather than beginning the next.

        Raises:
            InvalidField: ``execution`` is neither the current execution of ``step`` nor the next position.
        """
        current = self.current
        if execution is None:
            return current is not None and current.step == step and current.kind is StepKind.LLM and current.in_flight > 0
        if current is not None and execution == current.index:
            require(current.step == step and current.kind is StepKind.LLM, "execution",
                    f"{execution} is the run's execution of {current.kind.value} step '{current.step}', not of '{step}'")
            return True
        now_at = f" or {current.index} (its current one, of '{current.step}')" if current is not None else ""
        require(execution == len(self.executions), "execution",
                f"must be {len(self.executions)} (the run's next step){now_at}, got {execution}")
        return False

    def begin_request(self, step: str, input_tokens: int, now: float,
                      execution: int | None = None) -> tuple[StepExecution, StepExecution | None]:
        """A request of ``step`` arrives (of the execution at position ``execution`` when the client numbers
        them): the execution it belongs to, and the one it closed (if any).

        Raises:
            InvalidField: the run has finished, ``step`` is out of order, or ``execution`` is neither the
                current execution of ``step`` nor the next.
        """
        self._require_open()
        current = self.current
        if self.joins(step, execution) and current is not None:
            joined = current
            closed = None
            if joined.state is StepState.DONE:  # a sibling request arrived after the others ended
                self._set(joined, StepState.RUNNING, now)
        else:
            self._require_room(step)
            closed = self._close_current(step)
            joined = self._begin(step, StepKind.LLM, now)
        joined.in_flight += 1
        joined.requests += 1
        joined.input_tokens += input_tokens
        return joined, closed

    def first_token(self, execution: StepExecution, now: float) -> None:
        if execution.state is StepState.QUEUED:
            self._set(execution, StepState.RUNNING, now)

    def end_request(self, execution: StepExecution, output_tokens: int | None, now: float) -> None:
        """A request of ``execution`` ended: finished with ``output_tokens``, or failed (None)."""
        execution.in_flight -= 1
        execution.finished_s = now
        if output_tokens is None:
            if execution.state is not StepState.FAILED:
                self._set(execution, StepState.FAILED, now)
            return
        execution.output_tokens += output_tokens
        if execution.in_flight == 0 and execution.state is not StepState.FAILED:
            self._set(execution, StepState.DONE, now)

    def report_tool(self, step: str, duration_s: float, now: float) -> tuple[StepExecution, StepExecution | None]:
        """A tool step ran for ``duration_s`` and just ended: its execution, and the one it closed."""
        require(math.isfinite(duration_s) and duration_s >= 0, "duration_s", "must be >= 0")
        self._require_open()
        self._require_room(step)
        closed = self._close_current(step)
        execution = self._begin(step, StepKind.TOOL, now - duration_s)
        execution.finished_s = now
        self._set(execution, StepState.DONE, now)
        return execution, closed

    def has_failed_step(self) -> bool:
        return any(execution.state is StepState.FAILED for execution in self.executions)

    def require_finishable(self) -> None:
        """Raises InvalidField when the run has finished already or requests of it are still in flight."""
        self._require_open()
        current = self.current
        if current is not None:
            require(current.in_flight == 0, "run_id",
                    f"run '{self.run_id}' has {current.in_flight} request(s) of '{current.step}' in flight; finish it after they end")

    def finish(self, now: float, failed: bool = False) -> StepExecution | None:
        """Ends the run (failed when asked or when a step failed); returns its last execution, now
        closed (None for a run that did nothing).

        Raises:
            InvalidField: as ``require_finishable``.
        """
        self.require_finishable()
        current = self.current
        if current is not None:
            current.closed = True
        self.finished_s = now
        self.failed = failed or self.has_failed_step()
        self.events.append(RunEvent("", len(self.executions), StepState.FAILED if self.failed else StepState.DONE, now))
        return current

    def _require_open(self) -> None:
        require(self.finished_s is None, "run_id", f"run '{self.run_id}' has finished; submit a new run")

    def _require_room(self, next_step: str) -> None:
        require(len(self.executions) < MAX_RUN_STEPS, "step",
                f"'{next_step}' would be run '{self.run_id}''s step {len(self.executions) + 1}; a run holds at most "
                f"{MAX_RUN_STEPS} steps: finish it and submit a new run")

    def _close_current(self, next_step: str) -> StepExecution | None:
        current = self.current
        if current is None:
            return None
        require(current.in_flight == 0, "step",
                f"'{next_step}' cannot begin while {current.in_flight} request(s) of '{current.step}' are in flight")
        current.closed = True
        return current

    def _begin(self, step: str, kind: StepKind, started_s: float) -> StepExecution:
        execution = StepExecution(step, kind, len(self.executions), started_s)
        self.executions.append(execution)
        self.events.append(RunEvent(step, execution.index, StepState.QUEUED, started_s))
        return execution

    def _set(self, execution: StepExecution, state: StepState, now: float) -> None:
        execution.state = state
        self.events.append(RunEvent(execution.step, execution.index, state, now))
