"""PlannerService: protobuf in, ``forethought.planner``'s search and heuristics (off the event loop), protobuf out;
``Run`` hands a planned job to a ``JobRunner`` task and ``Status`` streams its state from the job store.

The conversions both ways live here: ``job_to_proto`` is what ``forethought plan`` sends from a job file,
``job_from_proto`` what the service plans. A broken rule names the field under ``job.`` (``job.models[0].shape.layers``,
``job.requests[3].prompt_tokens``); the status interceptor answers INVALID_ARGUMENT.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from functools import partial

import grpc
from redis.exceptions import RedisError

from forethought.cluster.registry import WorkerRegistry
from forethought.costmodel import ModelSpec
from forethought.domain import InvalidField, require
from forethought.planner import (
    ApplicationPlan,
    DevicePool,
    Job,
    JobRequest,
    ModelNode,
    OutputLengthCDF,
    realise,
)
from forethought.planner.calibration import CalibratedProfile, calibrated_cost_model, load_profile
from forethought.planner.job import validate_job
from forethought.planner.job_file import HARDWARE, JobFile, JobPlans, LengthSource, plan_job, resolve_cdfs
from forethought.planner.running import JobRun
from forethought.rpc.channels import ChannelTls
from forethought.rpc.errors import AlreadyExists, FailedPrecondition, NotFound, ServiceError
from forethought.services.planner.job_store import STATES, JobStore, StoredJob, stage_to_proto
from forethought.services.planner.runner import JobRunner
from forethought.v1 import planner_pb2, planner_pb2_grpc

log = logging.getLogger(__name__)

DEFAULT_MAX_SEQ_LEN = 4096
DEFAULT_TP_EFFICIENCY = 0.85
MIN_STATUS_INTERVAL_S = 0.05
MAX_STATUS_INTERVAL_S = 10.0
LEASE_TTL_S = 10.0
"""How long a job's run stays with its planner without a renewal: a planner that dies loses its runs this long
after its last renewal, and another planner takes them up."""
LEASE_RENEW_S = 2.5  # how often a planner renews its leases and looks for runs no planner holds


class SearchTimedOut(ServiceError):
    """The search ran past the planner's ``plan_timeout_s``."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


def job_to_proto(job_file: JobFile) -> planner_pb2.PlanJob:
    """The wire form of a job file's job, with each model's output-length source."""
    job, pool = job_file.job, job_file.job.devices
    models = []
    for model in job.models:
        source = job_file.lengths.get(model.name, LengthSource())
        spec = model.spec
        models.append(planner_pb2.PlanModel(
            name=model.name, max_seq_len=model.max_seq_len, max_output_tokens=model.max_output_tokens or 0,
            shape=planner_pb2.PlanModelShape(name=spec.name, params=spec.params, layers=spec.layers,
                                             kv_heads=spec.kv_heads, head_dim=spec.head_dim,
                                             bytes_per_param=spec.bytes_per_param, hidden_size=model.hidden_size),
            observed_output_lengths=list(source.observed), castillo_model=source.castillo_model,
        ))
    return planner_pb2.PlanJob(
        name=job_file.name, models=models,
        requests=[planner_pb2.PlanJobRequest(request_id=r.request_id, model=r.model, prompt_tokens=r.prompt_tokens,
                                             inputs=list(r.inputs), output_tokens=r.output_tokens or 0)
                  for r in job.requests],
        devices=planner_pb2.PlanDevices(hardware=job_file.hardware, count=pool.count, tp_efficiency=pool.tp_efficiency),
        edges=[planner_pb2.PlanEdge(source=source, target=target) for source, target in job.edges],
    )


def load_cost_profiles(names: Sequence[str]) -> list[CalibratedProfile]:
    """The calibrated profiles a ``PlanRequest`` names; InvalidField names the one that cannot be read."""
    profiles = []
    for index, name in enumerate(names):
        try:
            profiles.append(load_profile(name))
        except (FileNotFoundError, ValueError) as error:
            raise InvalidField(f"cost_profiles[{index}]", str(error)) from None
    return profiles


def job_from_proto(message: planner_pb2.PlanJob, seed: int) -> JobFile:
    """The job a ``PlanJob`` describes; InvalidField names the broken field under ``job.``."""
    try:
        return _job_from_proto(message, seed)
    except InvalidField as error:
        raise InvalidField(f"job.{error.field}", error.rule) from error


def _job_from_proto(message: planner_pb2.PlanJob, seed: int) -> JobFile:
    devices = message.devices
    require(devices.hardware in HARDWARE, "devices.hardware", f"must be one of {', '.join(HARDWARE)}")
    require(0 <= devices.tp_efficiency <= 1, "devices.tp_efficiency", "must be in (0, 1], or 0 for the default")
    pool = DevicePool(HARDWARE[devices.hardware], devices.count, devices.tp_efficiency or DEFAULT_TP_EFFICIENCY)
    models = tuple(_model_from_proto(model, f"models[{index}]") for index, model in enumerate(message.models))
    requests = tuple(JobRequest(r.request_id, r.model, r.prompt_tokens, tuple(r.inputs), r.output_tokens or None)
                     for r in message.requests)
    job = Job(models, requests, pool, tuple((edge.source, edge.target) for edge in message.edges))
    validate_job(job)
    lengths = {model.name: LengthSource(tuple(model.observed_output_lengths), model.castillo_model)
               for model in message.models if model.observed_output_lengths or model.castillo_model}
    return JobFile(message.name or "job", job, lengths, devices.hardware, seed)


def _model_from_proto(model: planner_pb2.PlanModel, field: str) -> ModelNode:
    shape = model.shape
    require(bool(model.name), f"{field}.name", "must be non-empty")
    require(shape.params > 0, f"{field}.shape.params", "must be positive")
    for name in ("layers", "kv_heads", "head_dim", "hidden_size"):
        require(getattr(shape, name) > 0, f"{field}.shape.{name}", "must be positive")
    require(shape.bytes_per_param >= 0, f"{field}.shape.bytes_per_param", "must be positive, or 0 for 2")
    require(model.max_seq_len >= 0, f"{field}.max_seq_len", "must be at least 2, or 0 for the default")
    require(model.max_output_tokens >= 0, f"{field}.max_output_tokens", "must be positive, or 0 for none")
    spec = ModelSpec(shape.name or model.name, shape.params, shape.layers, shape.kv_heads, shape.head_dim,
                     shape.bytes_per_param or 2)
    return ModelNode(model.name, spec, shape.hidden_size, model.max_seq_len or DEFAULT_MAX_SEQ_LEN,
                     model.max_output_tokens or None)


def stages_to_proto(plan: ApplicationPlan) -> list[planner_pb2.ExecutionStage]:
    return [stage_to_proto(stage) for stage in plan.stages]


def plans_to_proto(job_id: str, job: Job, plans: JobPlans) -> planner_pb2.PlanResponse:
    return planner_pb2.PlanResponse(
        job_id=job_id, stages=stages_to_proto(plans.samullm), estimated_makespan_s=plans.samullm.inference_s,
        baseline_max_heuristic_s=plans.max_heuristic.inference_s if plans.max_heuristic else 0.0,
        baseline_min_heuristic_s=plans.min_heuristic.inference_s if plans.min_heuristic else 0.0,
        search_s=plans.samullm.search_s, simulations=plans.samullm.simulations, requests=len(job.requests),
    )


CastilloLoader = Callable[[], Mapping[str, OutputLengthCDF]]


class PlannerServicer(planner_pb2_grpc.PlannerServiceServicer):
    """``Plan`` searches in a worker thread, at most ``concurrency`` at once, each for at most ``timeout_s``.

    NOTE: a thread cannot be stopped: a search past its timeout answers DEADLINE_EXCEEDED but runs on in the
    background and keeps its slot until it ends, so timed-out searches cannot pile up on the cores.
    """

    def __init__(self, castillo: CastilloLoader | None, timeout_s: float, store: JobStore, registry: WorkerRegistry,
                 concurrency: int = 1, tls: ChannelTls | None = None, clock: Callable[[], float] = time.time) -> None:
        self._castillo = castillo
        self._timeout_s = timeout_s
        self._slots = asyncio.Semaphore(concurrency)
        self._store = store
        self._registry = registry
        self._tls = tls
        self._clock = clock
        self._runs: dict[str, asyncio.Task[None]] = {}
        self.planner_id = uuid.uuid4().hex[:12]
        """This planner's name on the leases of the jobs it runs."""

    async def Plan(self, request: planner_pb2.PlanRequest, context: grpc.aio.ServicerContext) -> planner_pb2.PlanResponse:
        require(not request.stages and not request.gpus, "stages",
                "the stages/gpus form is not planned; describe the job in `job` (models with shapes, requests, devices)")
        require(request.samples in (0, 1), "samples", "must be 0 or 1: the planner draws one output length a request")
        require(request.HasField("job"), "job", "is required")
        job_file = job_from_proto(request.job, request.seed)
        profiles = load_cost_profiles(request.cost_profiles)
        job_id = request.job_id or f"{job_file.name}-{uuid.uuid4().hex[:8]}"
        if await self._store.get(job_id) is not None:
            raise AlreadyExists(f"job_id: {job_id!r} was planned already; Run it, or plan under another id")
        held = await self._held_models()
        await self._slots.acquire()
        search = asyncio.ensure_future(asyncio.to_thread(self._plan, job_file, request, profiles, held))
        search.add_done_callback(lambda _: self._slots.release())
        try:
            plans = await asyncio.wait_for(asyncio.shield(search), self._timeout_s)
        except TimeoutError:
            raise SearchTimedOut(f"the search of {job_id} ran past the planner's {self._timeout_s:g} s "
                                 "(--plan-timeout-s); plan a smaller job or raise the limit") from None
        log.info("planned %s: %d stages, %.1f s estimated, searched in %.2f s", job_id, len(plans.samullm.stages),
                 plans.samullm.inference_s, plans.samullm.search_s)
        reply = plans_to_proto(job_id, job_file.job, plans)
        if not await self._store.create(job_id, request.job, reply, request.seed, not request.no_preemption, profiles):
            raise AlreadyExists(f"job_id: {job_id!r} was planned meanwhile; plan under another id")
        return reply

    def _plan(self, job_file: JobFile, request: planner_pb2.PlanRequest,
              profiles: Sequence[CalibratedProfile], held: Mapping[str, int]) -> JobPlans:
        try:
            cdfs = resolve_cdfs(job_file, self._castillo)
            return plan_job(job_file, cdfs, time.perf_counter, not request.no_preemption, not request.skip_baselines,
                            profiles, held)
        except InvalidField as error:
            raise InvalidField(f"job.{error.field}", error.rule) from error

    async def Run(self, request: planner_pb2.RunRequest, context: grpc.aio.ServicerContext) -> planner_pb2.RunResponse:
        stored = await self._stored(request.job_id)
        require(request.max_tokens >= 0, "max_tokens", "must be positive, or 0 for each request's own limit")
        require(request.max_prompt_tokens >= 0, "max_prompt_tokens", "must be positive, or 0 for whole prompts")
        finished = await self._store.finished_count(stored.job_id)
        running = self._runs.get(stored.job_id)
        if stored.record.state == "done" or (running is not None and not running.done()):
            return planner_pb2.RunResponse(job_id=stored.job_id, state=STATES[stored.record.state],
                                           finished_requests=finished)
        held = await self._held_models()
        if not held:
            raise FailedPrecondition("no live worker is registered in the planner's namespace; start workers first")
        if not await self._store.hold(stored.job_id, self.planner_id, LEASE_TTL_S):
            # Another planner runs it (or ran it until it died, and one takes it up once its lease lapses).
            return planner_pb2.RunResponse(job_id=stored.job_id, state=STATES[stored.record.state],
                                           finished_requests=finished)
        record = stored.record
        record.max_tokens, record.max_prompt_tokens = request.max_tokens, request.max_prompt_tokens
        record.replan = request.replan
        finished = await self._start(stored, held)
        return planner_pb2.RunResponse(job_id=stored.job_id, state=planner_pb2.JOB_STATE_RUNNING,
                                       finished_requests=finished)

    async def _start(self, stored: StoredJob, held: Mapping[str, int]) -> int:
        """Starts (or resumes) the run of a job this planner holds the lease of, with the options in its record;
        returns how many of its requests had finished."""
        job = job_from_proto(stored.job, stored.seed).job
        outputs = await self._store.outputs(stored.job_id)
        run = stored.run(job, frozenset(outputs))
        record = stored.record
        # Before the record says "running": a job whose replanner cannot be built is not left so.
        replan = await asyncio.to_thread(self._replanner, stored, job, held) if record.replan else None
        record.state, record.error = "running", ""
        await self._store.save(stored.job_id, record)
        runner = JobRunner(self._store, self._registry, stored, run, record, outputs, replan, self._tls, self._clock)
        task = self._runs[stored.job_id] = asyncio.create_task(self._run_held(runner, stored.job_id),
                                                               name=f"job-{stored.job_id}")
        task.add_done_callback(partial(self._ended, stored.job_id))
        log.info("running %s: %d of %d requests finished before", stored.job_id, len(outputs), len(job.requests))
        return len(outputs)

    async def _run_held(self, runner: JobRunner, job_id: str) -> None:
        """Runs the job, then gives its lease up: for good when the run ended, to be taken up by another
        planner when it was stopped (this planner stopping)."""
        ended = False
        try:
            await runner.run()
            ended = True
        finally:
            try:
                await self._store.let_go(job_id, self.planner_id, ended)
            except RedisError as error:  # the lease lapses by itself; a planner finding the run ended drops it
                log.warning("job %s: its lease could not be given up (%s)", job_id, error)

    async def keep_leases(self) -> None:
        """Every ``LEASE_RENEW_S``: renews the leases of this planner's runs (a run whose lease another planner
        took meanwhile is stopped here, so a job never runs twice) and takes up runs no planner holds."""
        while True:
            await asyncio.sleep(LEASE_RENEW_S)
            try:
                for job_id, task in list(self._runs.items()):
                    if not task.done() and not await self._store.hold(job_id, self.planner_id, LEASE_TTL_S):
                        log.warning("job %s: another planner took its run up (this planner could not renew its "
                                    "lease in time); stopping the run here", job_id)
                        task.cancel()
                for job_id in await self._store.unheld_runs():
                    try:
                        await self._take_up(job_id)
                    except RedisError:
                        raise
                    except Exception:  # one job that cannot be resumed must not hold up the others
                        log.exception("job %s: its run could not be taken up; trying again once its lease lapses", job_id)
            except RedisError as error:
                log.warning("job leases: Redis failed (%s); trying again in %.1f s", error, LEASE_RENEW_S)

    async def _take_up(self, job_id: str) -> None:
        """Resumes a run whose planner stopped or died, unless it ended or another planner takes it first."""
        running = self._runs.get(job_id)
        if running is not None and not running.done():
            return  # this planner's own: its lease is renewed above
        stored = await self._store.get(job_id)
        if stored is None or stored.record.state != "running":
            await self._store.let_go(job_id, self.planner_id, ended=True)  # it ended, but its planner could not say so
            return
        held = await self._held_models()
        if not held or not await self._store.hold(job_id, self.planner_id, LEASE_TTL_S):
            return  # no worker yet, or another planner was first
        log.info("job %s: taking its run up, whose planner stopped or died", job_id)
        await self._start(stored, held)

    async def Status(self, request: planner_pb2.StatusRequest,
                     context: grpc.aio.ServicerContext) -> AsyncIterator[planner_pb2.StatusResponse]:
        interval = request.interval_s or 0.5
        require(MIN_STATUS_INTERVAL_S <= interval <= MAX_STATUS_INTERVAL_S, "interval_s",
                f"must be 0 (0.5 s) or in {MIN_STATUS_INTERVAL_S}..{MAX_STATUS_INTERVAL_S}")
        stored = await self._stored(request.job_id)
        job = job_from_proto(stored.job, stored.seed).job
        last = None
        while True:
            # NOTE: the record is read just before the count, so a count never runs ahead of its stage
            stored = await self._stored(request.job_id)
            message = status_message(stored, job, await self._store.finished_count(stored.job_id), self._clock())
            if last is None or _changed(last, message):
                yield message
                last = message
            if stored.record.state in ("done", "failed"):
                return
            await asyncio.sleep(interval)

    async def _held_models(self) -> dict[str, int]:
        """How many serving workers hold each model as their own: a plan of as many 1-device replicas
        pays no load (the runner never unloads a worker's own model)."""
        held: dict[str, int] = {}
        for record in await self._registry.workers():
            if record.state == "serving":
                held[record.model] = held.get(record.model, 0) + 1
        return held

    def _replanner(self, stored: StoredJob, job: Job, held: Mapping[str, int]) -> Callable[[JobRun], JobRun]:
        """Searches a run's stages left again on the job's sampled work (the plan's draws: the same seed)."""
        try:
            cdfs = resolve_cdfs(job_from_proto(stored.job, stored.seed), self._castillo)
            workload = realise(job, cdfs, random.Random(stored.seed))
        except InvalidField as error:
            raise InvalidField(f"job.{error.field}", error.rule) from error
        cost = calibrated_cost_model(job, stored.cost_profiles, held)
        return lambda run: run.replanned(workload, cost, time.perf_counter, stored.preemption)

    async def _stored(self, job_id: str) -> StoredJob:
        require(bool(job_id), "job_id", "must name a planned job")
        stored = await self._store.get(job_id)
        if stored is None:
            raise NotFound(f"job_id: no job {job_id!r} was planned in this namespace; Plan it first")
        return stored

    def _ended(self, job_id: str, task: asyncio.Task[None]) -> None:
        """A run ended or was stopped (Redis holds what a later ``Run`` needs): only running jobs stay in memory."""
        if self._runs.get(job_id) is task:
            del self._runs[job_id]

    async def close(self) -> None:
        """Stops the running jobs where they are and gives their leases up: their state stays in Redis, and another
        planner (or this one started again) takes their runs up."""
        for task in self._runs.values():
            task.cancel()
        await asyncio.gather(*self._runs.values(), return_exceptions=True)


def status_message(stored: StoredJob, job: Job, finished: int, now: float) -> planner_pb2.StatusResponse:
    """A job's progress from its stored state: stage, models placed, requests done, times beside the plan's."""
    record = stored.record
    run = stored.run(job, frozenset())
    done = record.state == "done"
    elapsed = ((record.ended_s if record.ended_s is not None else now) - record.stage_started_s[0]
               if record.stage_started_s else 0.0)
    return planner_pb2.StatusResponse(
        job_id=stored.job_id, state=STATES[record.state], finished_requests=finished,
        total_requests=len(job.requests), elapsed_s=elapsed,
        estimated_remaining_s=0.0 if done or finished == len(job.requests) else run.estimated_remaining_s(now),
        stage=min(record.pointer + 1, len(stored.plan.stages)) if record.stage_started_s else 0,
        stage_count=len(stored.plan.stages),
        running=[planner_pb2.ModelPlacement(model=name, replicas=dp, gpus=tp) for name, (dp, tp) in record.running.items()],
        stage_times=[planner_pb2.StageTime(stage=index + 1, estimated_s=estimated, actual_s=actual)
                     for index, (estimated, actual) in enumerate(run.stage_times(now))],
        error=record.error, job_name=stored.job.name,
    )


def _changed(last: planner_pb2.StatusResponse, message: planner_pb2.StatusResponse) -> bool:
    """Whether anything but the clock moved (times are re-sent with every other change)."""
    keys = ("state", "finished_requests", "stage", "running", "error")
    return any(getattr(last, key) != getattr(message, key) for key in keys) or len(last.stage_times) != len(message.stage_times)
