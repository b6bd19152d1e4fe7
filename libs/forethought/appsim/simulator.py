"""Discrete-event replay of application runs on a cluster of LLM engines (Hermes section 5 in simulation).

Runs arrive, and each walks its drawn steps in order. An LLM step sends its ``parallelism`` requests to
one global queue; when a batch slot of an engine frees, the run order (``order.py``) picks the run whose
oldest waiting request goes next, to the engine with the most free slots. Requests run to completion
(no preemption) and advance at their batch's speed (``engine.py``). A tool step takes its drawn seconds,
with no queue. A step whose backend is cold (a LoRA adapter or a tool the run has not used yet) first
waits its warm-up, unless a prewarm (Eq. 3, knob K) has warmed it; prewarming counts the warm-up taken
off the critical path (benefit) and the seconds a prewarmed backend sat ready unused (waste).

Pure and clock-free: events (``events.py``, one class per event type) sit in a heap keyed by (time,
priority, sequence), so the same runs give the same result.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from forethought.appsim.engine import Engine, LlmRequest
from forethought.appsim.estimates import EstimateCache
from forethought.appsim.events import EngineFinishes, Event, PrewarmDue, RunArrives, StepReady, ToolDone
from forethought.appsim.order import RunOrder
from forethought.appsim.result import PrewarmTally, RunOutcome, SimResult
from forethought.appsim.service_time import EngineModel
from forethought.appsim.state import BackendKey, RunState
from forethought.appsim.workload import AppRun, is_llm
from forethought.demand import BackendKind, BackendSpec, PDGraph, prewarm_decisions
from forethought.domain import require

WarmupSeconds = Callable[[BackendSpec], float]


def no_warmup(backend: BackendSpec) -> float:
    """Every backend is always warm."""
    return 0.0


@dataclass(frozen=True)
class ClusterSpec:
    """The engines, every backend's warm-up, and the prewarm knob K (None: no prewarming)."""

    engine: EngineModel
    engines: int = 1
    warmup_s: WarmupSeconds = no_warmup
    prewarm_knob: float | None = None

    def __post_init__(self) -> None:
        require(self.engines >= 1, "engines", "must be >= 1")
        require(self.prewarm_knob is None or 0 < self.prewarm_knob <= 1, "prewarm_knob", "must be in (0, 1]")


def backend_key(backend: BackendSpec) -> BackendKey | None:
    """What warming a backend loads; None for a bare model, which every engine serves."""
    if backend.kind is BackendKind.TOOL:
        return ("tool", backend.tool)
    return ("lora", backend.lora_adapter) if backend.lora_adapter else None


class Simulation:
    """One replay; ``run()`` returns its result."""

    def __init__(self, runs: Sequence[AppRun], graphs: Mapping[str, PDGraph], order: RunOrder, cluster: ClusterSpec,
                 estimates: EstimateCache | None = None) -> None:
        require(cluster.prewarm_knob is None or estimates is not None, "estimates", "prewarming reads demand estimates")
        for run in runs:
            run.validate(graphs)
        self.graphs = graphs
        self.order = order
        self.cluster = cluster
        self.estimates = estimates
        self.engines = [Engine(index, cluster.engine) for index in range(cluster.engines)]
        self.states = {run.run_id: RunState(run, self._demands(run)) for run in runs}
        self.backlogged: dict[str, RunState] = {}
        self.prewarm = PrewarmTally()
        self._heap: list[tuple[float, int, int, Event]] = []
        self._sequence = itertools.count()
        self._request_ids = itertools.count()
        for run in runs:
            self._push(run.arrival_s, RunArrives(run.run_id))

    def run(self) -> SimResult:
        while self._heap:
            now_s, _, _, event = heapq.heappop(self._heap)
            event.handle(self, now_s)
        outcomes = [RunOutcome(s.run, s.finished_s if s.finished_s is not None else float("nan"))
                    for s in self.states.values()]
        return SimResult(self.order.name, tuple(outcomes), self.prewarm)

    def _demands(self, run: AppRun) -> tuple[float, ...]:
        graph = self.graphs[run.application]
        return tuple(self.cluster.engine.unit_seconds(graph.units[s.unit].backend, s.consumption) if is_llm(graph, s)
                     else s.consumption.tool_duration_s for s in run.steps)

    def _push(self, time_s: float, event: Event) -> None:
        heapq.heappush(self._heap, (time_s, event.priority, next(self._sequence), event))

    # runs and steps

    def run_arrives(self, event: RunArrives, now_s: float) -> None:
        self._enter_step(self.states[event.run_id], 0, now_s)

    def _enter_step(self, state: RunState, step: int, now_s: float) -> None:
        state.step, state.attained_step_s = step, 0.0
        backend = self._backend(state)
        ready_s = now_s + self._warmup_wait(state, backend, now_s)
        state.step_started_s = ready_s
        self._push(ready_s, StepReady(state.run_id, step))
        if self.cluster.prewarm_knob is not None:
            self._plan_prewarms(state, ready_s)

    def step_ready(self, event: StepReady, now_s: float) -> None:
        state = self.states[event.run_id]
        consumption = state.current.consumption
        if not is_llm(self.graphs[state.run.application], state.current):
            self._push(now_s + consumption.tool_duration_s, ToolDone(state.run_id))
            return
        work = self.cluster.engine.request_seconds(consumption.input_tokens, consumption.output_tokens)
        for engine in self.engines:  # service counters up to now before an order reads them
            self._credit(engine.advance(now_s))
        if not state.waiting:
            self.order.on_backlog(state, self.backlogged.values())
        for _ in range(consumption.parallelism):
            state.waiting.append(LlmRequest(next(self._request_ids), state.run_id, event.step, work, now_s))
        state.outstanding = consumption.parallelism
        self.backlogged[state.run_id] = state
        self._dispatch(now_s)

    def tool_done(self, event: ToolDone, now_s: float) -> None:
        state = self.states[event.run_id]
        state.attained_step_s = state.step_demand_s[state.step]
        self._leave_step(state, now_s)

    def _leave_step(self, state: RunState, now_s: float) -> None:
        if state.step + 1 < len(state.run.steps):
            self._enter_step(state, state.step + 1, now_s)
            return
        state.finished_s = now_s
        for started_s, ready_s in state.prewarming.values():
            self.prewarm.unused += 1
            self.prewarm.waste_s += now_s - min(max(ready_s, started_s), now_s)
        state.prewarming.clear()

    def _backend(self, state: RunState) -> BackendSpec:
        return self.graphs[state.run.application].units[state.current.unit].backend

    # engines

    def _dispatch(self, now_s: float) -> None:
        while self.backlogged:
            engine = max(self.engines, key=lambda e: e.free_slots)
            if engine.free_slots <= 0:
                return
            state = min(self.backlogged.values(),
                        key=lambda s: (self.order.key(s, now_s), s.run.arrival_s, s.run_id))
            request = state.waiting.popleft()
            if not state.waiting:
                del self.backlogged[state.run_id]
            self._credit(engine.advance(now_s))
            engine.start(request)
            self._schedule_finish(engine)

    def engine_finishes(self, event: EngineFinishes, now_s: float) -> None:
        engine = self.engines[event.engine]
        if event.version != engine.version:
            return
        self._credit(engine.advance(now_s))
        for request in engine.take_finished():
            state = self.states[request.run_id]
            state.outstanding -= 1
            if state.outstanding == 0:
                self._leave_step(state, now_s)
        self._schedule_finish(engine)
        self._dispatch(now_s)

    def _schedule_finish(self, engine: Engine) -> None:
        finish_s = engine.next_finish_s()
        if finish_s is not None:
            self._push(finish_s, EngineFinishes(engine.index, engine.version))

    def _credit(self, progress: list[tuple[LlmRequest, float]]) -> None:
        for request, seconds in progress:
            state = self.states[request.run_id]
            if request.step == state.step:
                state.attained_step_s += seconds
            state.attained_llm_s += seconds
            self.order.on_service(state, seconds)

    # warm-ups and prewarms

    def _warmup_wait(self, state: RunState, backend: BackendSpec, now_s: float) -> float:
        """Seconds the step waits for its backend; counts what a prewarm took off that wait."""
        key, warmup_s = backend_key(backend), self.cluster.warmup_s(backend)
        if key is None or warmup_s <= 0 or key in state.warm:
            return 0.0
        state.warm.add(key)
        if key not in state.prewarming:
            self.prewarm.cold_wait_s += warmup_s
            return warmup_s
        _, ready_s = state.prewarming.pop(key)
        wait = max(0.0, ready_s - now_s)
        self.prewarm.used += 1
        self.prewarm.benefit_s += warmup_s - wait
        self.prewarm.waste_s += max(0.0, now_s - ready_s)
        self.prewarm.cold_wait_s += wait
        return wait

    def _is_cold(self, state: RunState, backend: BackendSpec) -> bool:
        key = backend_key(backend)
        return (key is not None and self.cluster.warmup_s(backend) > 0 and key not in state.warm
                and key not in state.prewarming)

    def _plan_prewarms(self, state: RunState, started_s: float) -> None:
        """Eq. 3 at the step's start: a timer for each cold downstream backend at ``start_after_s``."""
        if self.estimates is None or self.cluster.prewarm_knob is None:
            return
        decisions = prewarm_decisions(
            self.estimates.estimators[state.run.application], state.position, 0.0,
            lambda backend: self._is_cold(state, backend), self.cluster.warmup_s, self.cluster.prewarm_knob)
        for decision in decisions:
            if decision.start_after_s is not None:
                self._push(started_s + decision.start_after_s, PrewarmDue(state.run_id, state.step, decision.backend))

    def prewarm_due(self, event: PrewarmDue, now_s: float) -> None:
        state = self.states[event.run_id]
        if state.finished_s is not None or state.step != event.step:
            return  # the run left the step the decision was made in
        if not self._is_cold(state, event.backend):
            return
        key = backend_key(event.backend)
        if key is not None:
            self.prewarm.started += 1
            state.prewarming[key] = (now_s, now_s + self.cluster.warmup_s(event.backend))


def simulate(runs: Sequence[AppRun], graphs: Mapping[str, PDGraph], order: RunOrder, cluster: ClusterSpec,
             estimates: EstimateCache | None = None) -> SimResult:
    """Replays ``runs`` on ``cluster`` with ``order`` deciding which waiting request runs next.

    Raises:
        InvalidField: a run names an unknown application or unit, or prewarming lacks ``estimates``.
    """
    return Simulation(runs, graphs, order, cluster, estimates).run()
