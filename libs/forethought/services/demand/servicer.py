"""DemandService: protobuf in, ``forethought.demand`` (PDGraph, Monte Carlo estimates, ranks, Eq. 3)
over the applications in Redis, protobuf out."""

from __future__ import annotations

import asyncio
import math
import random
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence

import grpc

from forethought.demand import (
    BackendKind,
    BackendSpec,
    Consumption,
    DemandEstimate,
    PDGraph,
    PrewarmDecision,
    RunPosition,
    UnitExecution,
    gittins_rank,
    least_slack,
    prewarm_decisions,
)
from forethought.domain import require
from forethought.services.demand.applications import Applications
from forethought.services.demand.runs import PrewarmTimers, RunBoard, RunReport, Timer
from forethought.services.demand.store import ProfileStore
from forethought.v1 import demand_pb2, demand_pb2_grpc

QUANTILES = (10, 20, 30, 40, 50, 60, 70, 80, 90)
MAX_RUN_ID = 256
ESTIMATES_KEPT = 4096
"""Monte Carlo estimates kept by run position: re-ranking a run whose step has not changed (only its
attained service grew) reuses its estimate, as Hermes re-ranks every bucket period (section 3.3)."""


def quantiles(samples: Sequence[float]) -> list[float]:
    """p10 .. p90 of the samples, nearest rank."""
    ordered = sorted(samples)
    return [ordered[round(q / 100 * (len(ordered) - 1))] for q in QUANTILES]


def consumption_of(request: demand_pb2.RecordRequest, backend: BackendSpec) -> Consumption:
    """What a recorded step consumed; a tool step's duration is its measured service time."""
    require(math.isfinite(request.service_s) and request.service_s >= 0, "service_s", "must be >= 0")
    require(request.input_tokens >= 0, "input_tokens", "must be >= 0")
    require(request.output_tokens >= 0, "output_tokens", "must be >= 0")
    require(request.parallelism >= 0, "parallelism", "must be >= 0 (0 = 1)")
    duration_s = request.service_s if backend.kind is BackendKind.TOOL else 0.0
    return Consumption(request.input_tokens, request.output_tokens, max(1, request.parallelism), duration_s)


def require_follows(graph: PDGraph, previous: str | None, step: str, field: str) -> None:
    """``step`` may come next in a run whose last finished step is ``previous`` (None: nothing yet)."""
    graph.unit(step, field)
    if previous is None:
        require(step == graph.entry, field, f"a run starts at '{graph.entry}', not '{step}'")
    else:
        require(step in graph.units[previous].next_units, field, f"'{step}' does not follow '{previous}' in '{graph.name}'")


def require_path(graph: PDGraph, steps: Sequence[str], field: str) -> None:
    for index, step in enumerate(steps):
        require_follows(graph, steps[index - 1] if index else None, step, f"{field}[{index}]")


def backend_target(backend: BackendSpec) -> str:
    return backend.lora_adapter or backend.model or backend.tool


class DemandServicer(demand_pb2_grpc.DemandServiceServicer):
    """The four RPCs; ``warmup_s`` gives a backend's prewarm time, ``is_warm`` whether one already serves."""

    def __init__(
        self,
        applications: Applications,
        store: ProfileStore,
        board: RunBoard,
        rng: random.Random,
        knob: float,
        warmup_s: Callable[[BackendSpec], float],
        is_warm: Callable[[BackendSpec], bool],
    ) -> None:
        self._applications = applications
        self._store = store
        self._board = board
        self._rng = rng
        self._knob = knob
        self._warmup_s = warmup_s
        self._is_warm = is_warm
        self._estimates: OrderedDict[tuple[str, int, int, RunPosition], DemandEstimate] = OrderedDict()

    async def RegisterApplication(
        self, request: demand_pb2.RegisterApplicationRequest, context: grpc.aio.ServicerContext
    ) -> demand_pb2.RegisterApplicationResponse:
        require(not request.steps, "steps", "the dependency-graph form is not accepted; send application_file")
        application, kept = await self._applications.register(request.application, request.application_file, request.keep_existing)
        graph = application.graph
        if not kept:
            self._board.forget_application(graph.name)
        return demand_pb2.RegisterApplicationResponse(
            steps=len(graph.units), application=graph.name, entry=graph.entry, recorded=application.recorded, kept=kept
        )

    async def Record(self, request: demand_pb2.RecordRequest, context: grpc.aio.ServicerContext) -> demand_pb2.RecordResponse:
        require(0 < len(request.run_id) <= MAX_RUN_ID, "run_id", f"is required, at most {MAX_RUN_ID} characters")
        async with self._applications.locked(request.application) as application:
            graph = application.graph
            consumption = consumption_of(request, graph.unit(request.step, "step").backend)
            done = await self._store.run_steps(graph.name, request.run_id)
            require_follows(graph, done[-1].unit if done else None, request.step, "step")
            run = [*done, UnitExecution(request.step, consumption)]
            if request.run_finished:
                require(graph.units[request.step].may_end(), "run_finished", f"'{request.step}' cannot end a run")
            self._board.leave(graph.name, request.run_id)
            if not request.run_finished:
                await self._store.append_step(graph.name, request.run_id, run[-1])
                return demand_pb2.RecordResponse(run_steps=len(run), learnt=False)
            graph.record(run)
            await self._store.learn(graph, request.run_id)
        return demand_pb2.RecordResponse(run_steps=len(run), learnt=True)

    async def Estimate(self, request: demand_pb2.EstimateRequest, context: grpc.aio.ServicerContext) -> demand_pb2.EstimateResponse:
        deadline_s, attained_s = request.deadline_in_s, request.attained_s
        require(math.isfinite(deadline_s) and deadline_s >= 0, "deadline_in_s", "must be >= 0: the deadline has passed")
        require(math.isfinite(attained_s) and attained_s >= 0, "attained_s", "must be >= 0")
        input_tokens = request.input_tokens if request.HasField("input_tokens") else None
        require(input_tokens is None or input_tokens >= 0, "input_tokens", "must be >= 0")
        output_tokens = request.output_tokens if request.HasField("output_tokens") else None
        require(output_tokens is None or output_tokens >= 0, "output_tokens", "must be >= 0")
        require(len(request.run_id) <= MAX_RUN_ID, "run_id", f"must be at most {MAX_RUN_ID} characters")
        async with self._applications.locked(request.application) as application:
            graph = application.graph
            position = await self._position(graph, request, input_tokens, output_tokens)
            # The graph's version moves whenever it learns: an estimate from before is never reused after.
            key = (graph.name, id(application), graph.version, position)
            estimate = self._estimates.get(key)
            if estimate is None:
                rng = random.Random(self._rng.getrandbits(64))
                estimate = await asyncio.to_thread(application.estimator.estimate, position, rng)
                self._estimates[key] = estimate
                if len(self._estimates) > ESTIMATES_KEPT:
                    self._estimates.popitem(last=False)
        if request.run_id:
            self._board.report(graph.name, request.run_id, position, attained_s)
        return estimate_to_proto(estimate, position, attained_s, deadline_s, application.estimator.walks)

    async def WatchPrewarm(
        self, request: demand_pb2.WatchPrewarmRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[demand_pb2.WatchPrewarmResponse]:
        knob = request.effectiveness or self._knob
        require(0 < knob <= 1, "effectiveness", "must be in (0, 1]; 0 = the service's default")
        timers = PrewarmTimers()
        clock = self._board.clock
        with self._board.watch() as reports:
            while True:
                wait_s = timers.wait_s(clock())
                try:
                    report = await asyncio.wait_for(reports.get(), wait_s)
                except TimeoutError:
                    pass
                else:
                    if report is None:  # the service is stopping
                        return
                    timers.update(report)
                    await self._schedule(timers, report, knob)
                for timer in timers.pop_due(clock()):
                    decision = None if timers.sent(timer) else await self._due(timers, timer, knob)
                    if decision is not None:
                        timers.mark_sent(timer)
                        yield demand_pb2.WatchPrewarmResponse(decision=decision_to_proto(timer.report, decision, self._warmup_s))

    async def _position(self, graph: PDGraph, request: demand_pb2.EstimateRequest, input_tokens: int | None,
                        output_tokens: int | None) -> RunPosition:
        """Where the run stands: its recorded steps (else ``done_steps``) and the step it is in."""
        recorded = await self._store.run_steps(graph.name, request.run_id) if request.run_id else []
        names = list(request.done_steps)
        if recorded and names:
            require(names == [step.unit for step in recorded], "done_steps", f"must match the steps recorded for run '{request.run_id}'")
        names = names or [step.unit for step in recorded]
        require_path(graph, names, "done_steps")
        current = request.current_step
        if not current:
            require(not names, "current_step", "is required once the run has finished a step")
            current = graph.entry
        require_follows(graph, names[-1] if names else None, current, "current_step")
        return RunPosition(current, recorded[-1] if recorded else None, input_tokens, output_tokens)

    async def _schedule(self, timers: PrewarmTimers, report: RunReport, knob: float) -> None:
        for decision in await self._decisions(report, knob):
            if decision.start_after_s is not None:
                timers.add(Timer(report.started_s + decision.start_after_s, report, decision.unit))

    async def _due(self, timers: PrewarmTimers, timer: Timer, knob: float) -> PrewarmDecision | None:
        """The decision for the timer's step, re-taken now (the graph may have learnt meanwhile)."""
        for decision in await self._decisions(timer.report, knob):
            if decision.unit != timer.unit:
                continue
            if decision.trigger:
                return decision
            if decision.start_after_s is not None:
                timers.add(Timer(timer.report.started_s + decision.start_after_s, timer.report, decision.unit))
        return None

    async def _decisions(self, report: RunReport, knob: float) -> list[PrewarmDecision]:
        if report.position is None:
            return []
        position = report.position
        application = await self._applications.get(report.application)
        if position.unit not in application.graph.units:  # NOTE: only a report older than a replacement
            return []
        current = application.graph.units[position.unit].backend
        elapsed_s = max(0.0, self._board.clock() - report.started_s)

        def is_cold(backend: BackendSpec) -> bool:
            return backend != current and not self._is_warm(backend)

        async with application.lock:
            return prewarm_decisions(application.estimator, position, elapsed_s, is_cold, self._warmup_s, knob)


def estimate_to_proto(
    estimate: DemandEstimate, position: RunPosition, attained_s: float, deadline_s: float, walks: int
) -> demand_pb2.EstimateResponse:
    remaining = estimate.remaining_after(attained_s)
    slack_s = least_slack(estimate, attained_s, deadline_s, 0.0) if deadline_s > 0 else 0.0
    return demand_pb2.EstimateResponse(
        mean_remaining_s=sum(remaining) / len(remaining),
        remaining_quantiles_s=quantiles(remaining),
        gittins_rank=gittins_rank(estimate, attained_s),
        slack_s=slack_s,
        current_step=position.unit,
        walks=walks,
        bucket_period_s=estimate.total.bucket_width_s,
    )


def decision_to_proto(report: RunReport, decision: PrewarmDecision, warmup_s: Callable[[BackendSpec], float]) -> demand_pb2.PrewarmDecision:
    backend = decision.backend
    return demand_pb2.PrewarmDecision(
        application=report.application, run_id=report.run_id, step=decision.unit, backend=backend_target(backend),
        start_in_s=0.0, current_step=report.position.unit if report.position else "", model=backend.model,
        lora_adapter=backend.lora_adapter, tool=backend.tool, prompt_prefix=backend.prompt_prefix,
        selection_probability=decision.selection_probability,
        effectiveness=decision.effectiveness, warmup_s=warmup_s(backend),
    )
