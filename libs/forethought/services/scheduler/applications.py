"""Application runs at the scheduler (Hermes sections 3-4): each run's steps are reported to the demand
service, whose Gittins rank and remaining-demand estimate order the steps' requests (refreshed while
they wait), and whose prewarm decisions (Eq. 3) become the workers' ``Prewarm`` calls.

The bookkeeping is ``forethought.scheduling.application_runs``; this module does the I/O around it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import grpc
from opentelemetry import trace
from prometheus_client import Counter, Gauge, Histogram

from forethought.demand import require_application_name
from forethought.domain import EngineStats, InvalidField, require
from forethought.rpc import convert
from forethought.rpc.errors import AlreadyExists, FailedPrecondition, NotFound, ServiceError, invalid_argument_of
from forethought.scheduling.application_runs import ApplicationRun, RunEvent, StepExecution, StepState
from forethought.scheduling.degradation import DependencyHealth
from forethought.services.scheduler.dependency_reports import record_outcome
from forethought.services.scheduler.pool import WorkerPool
from forethought.telemetry.tracing import trace_metadata
from forethought.v1 import demand_pb2, demand_pb2_grpc, scheduler_pb2, worker_pb2

log = logging.getLogger(__name__)

MAX_RUN_ID = 256
FINISHED_RUNS_KEPT_S = 300.0  # a finished run stays watchable this long
_Reply = TypeVar("_Reply")

APPLICATION_COMPLETION = Histogram(
    "forethought_application_completion_seconds", "application completion time (ACT) of finished runs",
    ["application", "outcome"], buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000),
)
APPLICATION_RUNS = Gauge("forethought_application_runs", "application runs submitted and not finished", ["application"])
RANK_UPDATES = Counter(
    "forethought_application_rank_updates_total", "waiting application steps re-ordered by a new rank of their run",
)
PREWARMS_SENT = Counter(
    "forethought_prewarms_sent_total", "prewarm decisions of the demand service sent to a worker, by kind and outcome",
    ["kind", "outcome"],
)

_STATES = {
    StepState.QUEUED: scheduler_pb2.STEP_STATE_QUEUED,
    StepState.RUNNING: scheduler_pb2.STEP_STATE_RUNNING,
    StepState.DONE: scheduler_pb2.STEP_STATE_DONE,
    StepState.FAILED: scheduler_pb2.STEP_STATE_FAILED,
}


@dataclass
class RunRank:
    """The demand service's latest view of a run."""

    gittins_rank: float = 0.0
    remaining_s: float = 0.0


@dataclass
class LiveRun:
    run: ApplicationRun
    rank: RunRank
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: dict[str, StepExecution] = field(default_factory=dict)  # its requests not yet streaming
    step_tokens: tuple[int | None, int | None] = (None, None)  # the current step's prompt and forecast lengths
    learning: bool = True  # False once the demand service was down for it: no more reports, its rank frozen

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


@dataclass(frozen=True)
class StepTicket:
    """What a request of an application step carries through the scheduler."""

    run_id: str
    execution: StepExecution
    rank: RunRank
    deadline_s: float  # the run's, absolute; 0 = none


class DemandDown(Exception):
    """The demand service did not answer: application runs go on without it (degraded), never fail for it."""


class ApplicationRuns:
    """The runs this scheduler replica was given; ``revise`` re-orders a waiting request.

    Args:
        demand: the demand service's stub; None answers FAILED_PRECONDITION to every application call.
        revise: ``(request_id, application_rank, application_remaining_s) -> bool``, the placement loop's.
    """

    def __init__(self, demand: demand_pb2_grpc.DemandServiceStub | None, revise: Callable[[str, float, float], bool],
                 timeout_s: float, idle_ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        self._demand = demand
        self._revise = revise
        self._timeout_s = timeout_s
        self._idle_ttl_s = idle_ttl_s
        self._clock = clock
        self._runs: dict[str, LiveRun] = {}
        self.health = DependencyHealth("demand", configured=demand is not None)

    # ----- the RPCs -----------------------------------------------------------------------------

    async def submit(self, request: scheduler_pb2.SubmitApplicationRequest) -> scheduler_pb2.SubmitApplicationResponse:
        require(bool(request.application), "application", "is required")
        require_application_name(request.application, "application")  # a metric label even when demand is down
        require(len(request.run_id) <= MAX_RUN_ID, "run_id", f"must be at most {MAX_RUN_ID} characters")
        now = self._clock()
        deadline_s = convert.seconds_of(request.deadline, "deadline") if request.HasField("deadline") else 0.0
        require(not request.HasField("deadline") or deadline_s > now, "deadline", "must be in the future")
        run_id = request.run_id or uuid.uuid4().hex
        if run_id in self._runs:
            raise AlreadyExists(f"run_id: {run_id!r} is already a run")
        run = ApplicationRun(run_id, request.application, now, deadline_s)
        try:
            estimate = await self._estimate(demand_pb2.EstimateRequest(application=request.application,
                                                                       deadline_in_s=run.deadline_in_s(now)))
            rank, learning = RunRank(estimate.gittins_rank, estimate.mean_remaining_s), True
        except DemandDown:  # degraded: the run goes on unranked and unchecked, and is not learnt
            rank, learning = RunRank(), False
        if run_id in self._runs:  # submitted twice at once: the other call won
            raise AlreadyExists(f"run_id: {run_id!r} is already a run")
        self._runs[run_id] = LiveRun(run, rank, learning=learning)
        APPLICATION_RUNS.labels(request.application).inc()
        log.info("application run %s of %s submitted (estimated %.1f s)", run_id, request.application, rank.remaining_s)
        return scheduler_pb2.SubmitApplicationResponse(
            run_id=run_id, estimated_completion_s=rank.remaining_s, gittins_rank=rank.gittins_rank)

    async def report_step(self, request: scheduler_pb2.ReportStepRequest) -> scheduler_pb2.ReportStepResponse:
        require(bool(request.step), "step", "is required")
        live = self._live(request.run_id)
        async with live.lock:
            run = live.run
            await self._reporting(live, partial(self._require_next, run, request.step))
            _, closed = run.report_tool(request.step, request.duration_s, self._clock())
            if closed is not None:
                await self._reporting(live, partial(self._record, run, closed))
            await self._reporting(live, partial(self._refresh, live, request.step))
            live.notify()
        return scheduler_pb2.ReportStepResponse(remaining_s=live.rank.remaining_s, gittins_rank=live.rank.gittins_rank)

    async def finish(self, request: scheduler_pb2.FinishApplicationRequest) -> scheduler_pb2.FinishApplicationResponse:
        live = self._live(request.run_id)
        return await self._finish(live, request.failed)

    async def _finish(self, live: LiveRun, failed_as_asked: bool) -> scheduler_pb2.FinishApplicationResponse:
        async with live.lock:
            run = live.run
            run.require_finishable()
            require(run.current is not None or failed_as_asked, "run_id",
                    f"run '{run.run_id}' has run no step; set failed to abandon it")
            failed = failed_as_asked or run.has_failed_step()
            learnt = False
            last = run.current
            if last is not None and not failed and live.learning:  # the demand graph checks the last step may end a run
                recorded = await self._reporting(live, partial(self._record, run, last, run_finished=True))
                learnt = recorded is not None and recorded.learnt
            run.finish(self._clock(), failed)
            live.notify()
        act_s = run.act_s or 0.0
        APPLICATION_RUNS.labels(run.application).dec()
        APPLICATION_COMPLETION.labels(run.application, "failed" if run.failed else "done").observe(act_s)
        self._trace(run)
        asyncio.get_running_loop().call_later(FINISHED_RUNS_KEPT_S, self._runs.pop, run.run_id, None)
        return scheduler_pb2.FinishApplicationResponse(act_s=act_s, steps=len(run.executions), learnt=learnt)

    async def watch(self, run_id: str) -> AsyncIterator[scheduler_pb2.WatchApplicationResponse]:
        live = self._live(run_id)
        sent = 0
        while True:
            changed = live.changed
            events = live.run.events[sent:]
            sent += len(events)
            for event in events:
                yield self._event_message(live, event)
            if live.run.finished and sent == len(live.run.events):
                return
            await changed.wait()

    # ----- the steps of Generate ----------------------------------------------------------------

    async def begin_step(self, run_id: str, step: str, request_id: str, input_tokens: int,
                         forecast_tokens: float = 0.0, execution_index: int | None = None) -> StepTicket:
        """A request of an LLM step arrives, with the predictor's forecast of its output (0: none) and the
        position of its execution when the client numbers them; its ticket carries the run's rank for the queue.

        Raises:
            InvalidField: unknown run (``application_id``), a finished run, a step or execution out of order.
        """
        require(bool(step), "step", "is required with application_id")
        live = self._live(run_id, "application_id")
        async with live.lock:
            run = live.run
            joins = run.joins(step, execution_index)
            if not joins:
                await self._reporting(live, partial(self._require_next, run, step))
            execution, closed = run.begin_request(step, input_tokens, self._clock(), execution_index)
            try:
                if closed is not None:
                    await self._reporting(live, partial(self._record, run, closed))
                if not joins:
                    forecast = round(forecast_tokens) if forecast_tokens > 0 else None
                    await self._reporting(live, partial(self._refresh, live, step, input_tokens, forecast))
            except BaseException:  # the caller gets no ticket to end the request with: a run left in flight never ends
                run.end_request(execution, None, self._clock())
                live.notify()
                raise
            live.waiting[request_id] = execution
            live.notify()
        return StepTicket(run_id, execution, live.rank, live.run.deadline_s)

    def first_token(self, ticket: StepTicket, request_id: str) -> None:
        live = self._runs.get(ticket.run_id)
        if live is not None:
            live.waiting.pop(request_id, None)
            live.run.first_token(ticket.execution, self._clock())
            live.notify()

    def end_step(self, ticket: StepTicket, request_id: str, output_tokens: int | None) -> None:
        """A request of the step ended: finished with ``output_tokens``, or failed or cancelled (None)."""
        live = self._runs.get(ticket.run_id)
        if live is not None:
            live.waiting.pop(request_id, None)
            live.run.end_request(ticket.execution, output_tokens, self._clock())
            live.notify()

    # ----- ranks and prewarming -----------------------------------------------------------------

    async def expire_idle(self) -> list[str]:
        """Abandons (finishes as failed) the runs that had no step for ``idle_ttl_s`` and nothing in flight."""
        now = self._clock()
        idle = [live for live in self._runs.values()
                if not live.run.finished and now - live.run.last_activity_s() > self._idle_ttl_s
                and (live.run.current is None or live.run.current.in_flight == 0)]
        for live in idle:
            log.info("application run %s of %s abandoned: idle for %.0f s", live.run.run_id, live.run.application, self._idle_ttl_s)
            await self._finish(live, failed_as_asked=True)
        return [live.run.run_id for live in idle]

    async def refresh_ranks(self) -> int:
        """Re-estimates every run with requests waiting (their attained service grew) and re-orders
        those requests; returns how many requests were re-ordered."""
        revised = 0
        for live in list(self._runs.values()):
            if not live.waiting or live.run.finished or live.run.current is None or not live.learning:
                continue
            async with live.lock:
                current = live.run.current
                if current is None or live.run.finished:
                    continue
                await self._reporting(live, partial(self._refresh, live, current.step, *live.step_tokens))  # the kept estimate
                for request_id in list(live.waiting):
                    revised += self._revise(request_id, live.rank.gittins_rank, live.rank.remaining_s)
                live.notify()
        RANK_UPDATES.inc(revised)
        return revised

    async def prewarm_from_decisions(self, pool: WorkerPool, lora_root: str,
                                     tokenize: Callable[[str, str], Awaitable[list[int]]]) -> None:
        """Follows the demand service's prewarm decisions and sends each to a worker; returns when the
        stream ends (the caller reconnects)."""
        if self._demand is None:
            return
        stream = self._demand.WatchPrewarm(demand_pb2.WatchPrewarmRequest(), metadata=trace_metadata())
        try:
            async for reply in stream:
                self._record_health(True)
                await send_prewarm(reply.decision, pool, lora_root, tokenize)
        except grpc.aio.AioRpcError as error:
            self._record_health(False, f"{error.code().name}: {error.details()}")

    # ----- internals ----------------------------------------------------------------------------

    def _live(self, run_id: str, field: str = "run_id") -> LiveRun:
        require(bool(run_id), field, "is required")
        live = self._runs.get(run_id)
        if live is None:
            raise NotFound(f"{field}: no application run {run_id!r} on this scheduler (submit it with SubmitApplication)")
        return live

    async def _require_next(self, run: ApplicationRun, step: str) -> None:
        """Asks the demand graph whether ``step`` may follow the run's steps so far (a what-if estimate)."""
        done = [execution.step for execution in run.executions]
        try:
            await self._estimate(demand_pb2.EstimateRequest(application=run.application, done_steps=done, current_step=step))
        except InvalidField as refused:
            if refused.field == "current_step":
                raise InvalidField("step", refused.rule) from refused
            raise

    async def _refresh(self, live: LiveRun, step: str, input_tokens: int | None = None,
                       output_tokens: int | None = None) -> None:
        """The run is in ``step``: tells the demand service (which prewarms on it) and takes its rank."""
        run = live.run
        now = self._clock()
        live.step_tokens = (input_tokens, output_tokens)
        estimate = await self._estimate(demand_pb2.EstimateRequest(
            application=run.application, run_id=run.run_id, current_step=step, attained_s=run.attained_s(now),
            deadline_in_s=run.deadline_in_s(now), input_tokens=input_tokens, output_tokens=output_tokens))
        live.rank.gittins_rank = estimate.gittins_rank
        live.rank.remaining_s = estimate.mean_remaining_s

    async def _record(self, run: ApplicationRun, execution: StepExecution, run_finished: bool = False) -> demand_pb2.RecordResponse:
        return await self._call(lambda demand: demand.Record(demand_pb2.RecordRequest(
            application=run.application, run_id=run.run_id, step=execution.step, service_s=execution.service_s,
            input_tokens=execution.mean_tokens(execution.input_tokens),
            output_tokens=execution.mean_tokens(execution.output_tokens),
            parallelism=execution.parallelism, run_finished=run_finished,
        ), timeout=self._timeout_s, metadata=trace_metadata()))

    async def _estimate(self, request: demand_pb2.EstimateRequest) -> demand_pb2.EstimateResponse:
        return await self._call(lambda demand: demand.Estimate(request, timeout=self._timeout_s, metadata=trace_metadata()))

    async def _call(self, call: Callable[[demand_pb2_grpc.DemandServiceStub], Awaitable[_Reply]]) -> _Reply:
        if self._demand is None:
            raise FailedPrecondition("application runs need the demand service: start the scheduler with --demand-address")
        try:
            reply = await call(self._demand)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                refused = invalid_argument_of(error)
                raise InvalidField(refused.field, refused.rule) from error
            if error.code() == grpc.StatusCode.NOT_FOUND:
                raise NotFound(error.details() or "not found by the demand service") from error
            self._record_health(False, f"{error.code().name}: {error.details()}")
            raise DemandDown(error.details()) from error
        self._record_health(True)
        return reply

    async def _reporting(self, live: LiveRun, report: Callable[[], Awaitable[_Reply]]) -> _Reply | None:
        """A report of the run to the demand service; None when the run no longer reports, or the service
        is down, which stops the run's reports for good (a gap would leave its later steps out of order)."""
        if not live.learning:
            return None
        try:
            return await report()
        except DemandDown:
            live.learning = False
            log.warning("application run %s goes on without the demand service: its rank stays %.2f and it will "
                        "not be learnt", live.run.run_id, live.rank.gittins_rank)
            return None

    def _record_health(self, ok: bool, error: str = "") -> None:
        record_outcome(self.health, ok, error,
                       went_down="demand service unreachable ({error}): application runs go on unranked and unlearnt",
                       came_back="demand service answers again: new application runs are ranked and learnt")

    def _event_message(self, live: LiveRun, event: RunEvent) -> scheduler_pb2.WatchApplicationResponse:
        run = live.run
        finished = not event.step
        return scheduler_pb2.WatchApplicationResponse(
            run_id=run.run_id, step=event.step, state=_STATES[event.state], execution=event.index,
            remaining_s=0.0 if finished else live.rank.remaining_s, gittins_rank=live.rank.gittins_rank,
            finished=finished, act_s=(run.act_s or 0.0) if finished else 0.0, at_s=event.at_s - run.submitted_s,
        )

    @staticmethod
    def _trace(run: ApplicationRun) -> None:
        """One trace per run: a span from submission to finish, a child span per step execution."""
        assert run.finished_s is not None  # NOTE: called once the run finished
        tracer = trace.get_tracer("forethought.applications")
        span = tracer.start_span(f"application {run.application}", start_time=_ns(run.submitted_s), attributes={
            "forethought.run_id": run.run_id, "forethought.application": run.application, "forethought.act_s": run.act_s or 0.0,
            "forethought.failed": run.failed,
        })
        context = trace.set_span_in_context(span)
        for execution in run.executions:
            child = tracer.start_span(f"step {execution.step}", context=context, start_time=_ns(execution.started_s),
                                        attributes={"forethought.requests": execution.requests,
                                                    "forethought.state": execution.state.value})
            child.end(end_time=_ns(execution.finished_s or execution.started_s))
        span.end(end_time=_ns(run.finished_s))


def _requests_on(load: EngineStats) -> int:
    return load.rt.running + load.rt.waiting + load.be.running + load.be.waiting


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


async def send_prewarm(decision: demand_pb2.PrewarmDecision, pool: WorkerPool, lora_root: str,
                       tokenize: Callable[[str, str], Awaitable[list[int]]]) -> None:
    """Sends one prewarm decision to the least-loaded worker that can act on it.

    A tool step warms its tool kind; an LLM step with an adapter loads the adapter (from
    ``lora_root/<adapter>`` on the worker; skipped without a root); an LLM step with a prompt prefix, on a
    model a worker serves, prefills the prefix (``tokenize(model, text)`` gives its tokens); an LLM step
    on a model no worker serves loads that model.
    """
    if decision.tool:
        request = worker_pb2.PrewarmRequest(kind=worker_pb2.PREWARM_KIND_TOOL, target=decision.tool)
        workers = list(pool.records)
        kind = "tool"
    elif decision.lora_adapter:
        kind = "lora"
        if not lora_root:
            PREWARMS_SENT.labels(kind, "skipped").inc()
            log.info("prewarm of adapter %s skipped: the scheduler has no --lora-root", decision.lora_adapter)
            return
        request = worker_pb2.PrewarmRequest(kind=worker_pb2.PREWARM_KIND_LORA, target=decision.lora_adapter,
                                            model=decision.model, lora_path=f"{lora_root.rstrip('/')}/{decision.lora_adapter}")
        workers = [worker for worker, record in pool.records.items() if record.model == decision.model]
    elif decision.prompt_prefix and pool.serves(decision.model):
        kind = "kv_prefix"
        try:
            prefix = await tokenize(decision.model, decision.prompt_prefix)
        except ServiceError as error:
            PREWARMS_SENT.labels(kind, "failed").inc()
            log.warning("prewarm of the prefix of step %s: tokenizing failed: %s", decision.step, error)
            return
        request = worker_pb2.PrewarmRequest(kind=worker_pb2.PREWARM_KIND_KV_PREFIX, prefix_token_ids=prefix, model=decision.model)
        workers = [worker for worker, record in pool.records.items() if record.model == decision.model]
    else:
        kind = "model"
        if pool.serves(decision.model):
            PREWARMS_SENT.labels(kind, "already_warm").inc()
            return
        request = worker_pb2.PrewarmRequest(kind=worker_pb2.PREWARM_KIND_MODEL, target=decision.model)
        workers = list(pool.records)
    if not workers:
        PREWARMS_SENT.labels(kind, "no_worker").inc()
        return
    worker = min(workers, key=lambda worker_id: _requests_on(pool.records[worker_id].load))
    try:
        reply = await pool.stub(worker).Prewarm(request, timeout=max(5.0, 4 * decision.warmup_s), metadata=trace_metadata())
    except (KeyError, grpc.aio.AioRpcError) as error:
        PREWARMS_SENT.labels(kind, "failed").inc()
        log.warning("prewarm of %s %s on %s failed: %s", kind, decision.backend, worker, error)
        return
    outcome = worker_pb2.PrewarmStatus.Name(reply.status).removeprefix("PREWARM_STATUS_").lower()
    PREWARMS_SENT.labels(kind, outcome).inc()
    log.info("prewarmed %s %s on %s for step %s of run %s: %s in %.3f s %s", kind, decision.backend, worker, decision.step,
             decision.run_id, outcome, reply.warmup_s, reply.detail)
