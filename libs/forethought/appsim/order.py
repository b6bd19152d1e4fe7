"""Orders of waiting LLM requests in the application simulator: when a batch slot frees, the run with
the lowest key sends its oldest waiting request. Built by name with ``build_order``.

| name | key of a run | stands for |
|---|---|---|
| ``fcfs`` | enqueue time of its oldest waiting request | request-level FCFS (vLLM) |
| ``parrot`` | the run's arrival | application-level FCFS (Parrot) |
| ``vtc`` | service its client has received (a client joining the queue is lifted to the least backlogged counter) | VTC fair share |
| ``atlas`` | service the run has received across all its calls | least attained service (Autellix ATLAS) |
| ``srpt-mean`` | mean remaining demand of the estimate | SRPT on the mean (Hermes without Gittins) |
| ``gittins`` | Eq. 1 rank | Hermes |
| ``oracle`` | the run's true remaining demand | SRPT knowing the truth |
| ``edf`` | deadline | earliest deadline first |
| ``lstf`` | Eq. 2 slack | Hermes-DDL |

Estimated keys are refreshed once per bucket period of the run's estimate (``bucket_width_s``), and
whenever the run enters a new step; ties go to the earlier run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from forethought.appsim.estimates import EstimateCache
from forethought.appsim.state import RunState
from forethought.demand import DemandEstimate, gittins_rank, least_slack
from forethought.domain import InvalidField


class RunOrder:
    """Lowest key first. Subclasses keep what they need through the hooks."""

    name = ""

    def key(self, state: RunState, now_s: float) -> float:
        raise NotImplementedError

    def on_service(self, state: RunState, seconds: float) -> None:
        """``seconds`` of service went to ``state``'s run."""

    def on_backlog(self, state: RunState, backlogged: Iterable[RunState]) -> None:
        """``state``'s run has requests waiting again; ``backlogged`` are the other runs waiting."""


class RequestFcfs(RunOrder):
    name = "fcfs"

    def key(self, state: RunState, now_s: float) -> float:
        return state.waiting[0].enqueued_s


class ApplicationFcfs(RunOrder):
    name = "parrot"

    def key(self, state: RunState, now_s: float) -> float:
        return state.run.arrival_s


class VirtualTokenCounter(RunOrder):
    name = "vtc"

    def __init__(self) -> None:
        self.counters: dict[str, float] = {}

    def key(self, state: RunState, now_s: float) -> float:
        return self.counters.get(state.run.client, 0.0)

    def on_service(self, state: RunState, seconds: float) -> None:
        self.counters[state.run.client] = self.counters.get(state.run.client, 0.0) + seconds

    def on_backlog(self, state: RunState, backlogged: Iterable[RunState]) -> None:
        others = [self.key(other, 0.0) for other in backlogged if other.run.client != state.run.client]
        if others:  # a returning client does not bank the service it did not ask for
            self.counters[state.run.client] = max(self.key(state, 0.0), min(others))


class LeastAttainedService(RunOrder):
    name = "atlas"

    def key(self, state: RunState, now_s: float) -> float:
        return state.attained_llm_s


class TrueRemaining(RunOrder):
    name = "oracle"

    def key(self, state: RunState, now_s: float) -> float:
        return state.true_remaining_s


class EarliestDeadline(RunOrder):
    name = "edf"

    def key(self, state: RunState, now_s: float) -> float:
        return state.run.deadline_s if state.run.deadline_s is not None else math.inf


class Estimated(RunOrder):
    """A key read off the run's demand estimate, refreshed every bucket period or on a new step."""

    def __init__(self, name: str, estimates: EstimateCache, rank: Callable[[DemandEstimate, RunState], float]) -> None:
        self.name = name
        self.estimates = estimates
        self.rank = rank
        self._cached: dict[str, tuple[int, float, float, float]] = {}  # run -> (step, at, period, key)

    def key(self, state: RunState, now_s: float) -> float:
        cached = self._cached.get(state.run_id)
        if cached is not None and cached[0] == state.step and now_s < cached[1] + cached[2]:
            return cached[3]
        estimate = self.estimates.estimate(state.run.application, state.position)
        value = self.rank(estimate, state)
        self._cached[state.run_id] = (state.step, now_s, estimate.total.bucket_width_s, value)
        return value


def mean_remaining(estimate: DemandEstimate, state: RunState) -> float:
    remaining = estimate.remaining_after(state.attained_step_s)
    return sum(remaining) / len(remaining)


def gittins(estimate: DemandEstimate, state: RunState) -> float:
    return gittins_rank(estimate, state.attained_step_s)


def slack(estimate: DemandEstimate, state: RunState) -> float:
    """Eq. 2 at time 0: every run's slack falls at the same rate, so the order is the same at any time."""
    deadline = state.run.deadline_s if state.run.deadline_s is not None else math.inf
    return least_slack(estimate, state.attained_step_s, deadline, 0.0)


SIMPLE: dict[str, Callable[[], RunOrder]] = {
    "fcfs": RequestFcfs, "parrot": ApplicationFcfs, "vtc": VirtualTokenCounter, "atlas": LeastAttainedService,
    "oracle": TrueRemaining, "edf": EarliestDeadline,
}
ESTIMATED: dict[str, Callable[[DemandEstimate, RunState], float]] = {
    "srpt-mean": mean_remaining, "gittins": gittins, "lstf": slack,
}
ORDERS = (*SIMPLE, *ESTIMATED)


def build_order(name: str, estimates: EstimateCache | None = None) -> RunOrder:
    """A fresh order by name (one per replay: some keep counters).

    Raises:
        InvalidField: an unknown name, or an estimated order without ``estimates``.
    """
    if name in SIMPLE:
        return SIMPLE[name]()
    if name not in ESTIMATED:
        raise InvalidField("order", f"must be one of {', '.join(ORDERS)}")
    if estimates is None:
        raise InvalidField("estimates", f"the {name} order reads demand estimates")
    return Estimated(name, estimates, ESTIMATED[name])
