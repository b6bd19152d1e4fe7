"""PlannerService: protobuf in, ``forethought.planner``'s search and heuristics (off the event loop), protobuf out.

The conversions both ways live here: ``job_to_proto`` is what ``forethought plan`` sends from a job file,
``job_from_proto`` what the service plans. A broken rule names the field under ``job.`` (``job.models[0].shape.layers``,
``job.requests[3].prompt_tokens``); the status interceptor answers INVALID_ARGUMENT.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

import grpc

from forethought.costmodel import ModelSpec
from forethought.domain import InvalidField, require
from forethought.planner import ApplicationPlan, DevicePool, Job, JobRequest, ModelNode, OutputLengthCDF
from forethought.planner.job import validate_job
from forethought.planner.job_file import HARDWARE, JobFile, JobPlans, LengthSource, plan_job, resolve_cdfs
from forethought.rpc.errors import ServiceError, Unimplemented
from forethought.v1 import planner_pb2, planner_pb2_grpc

log = logging.getLogger(__name__)

DEFAULT_MAX_SEQ_LEN = 4096
DEFAULT_TP_EFFICIENCY = 0.85


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
    return [
        planner_pb2.ExecutionStage(
            placements=[planner_pb2.ModelPlacement(model=name, gpus=plan_.tp, replicas=plan_.dp)
                        for name, plan_ in stage.assignments],
            estimated_s=stage.duration_s, start_s=stage.start_s, flops=stage.flops,
            finished_models=list(stage.finished_models),
        )
        for stage in plan.stages
    ]


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

    def __init__(self, castillo: CastilloLoader | None, timeout_s: float, concurrency: int = 1) -> None:
        self._castillo = castillo
        self._timeout_s = timeout_s
        self._slots = asyncio.Semaphore(concurrency)
        self._planned = 0

    async def Plan(self, request: planner_pb2.PlanRequest, context: grpc.aio.ServicerContext) -> planner_pb2.PlanResponse:
        require(not request.stages and not request.gpus, "stages",
                "the stages/gpus form is not planned; describe the job in `job` (models with shapes, requests, devices)")
        require(request.samples in (0, 1), "samples", "must be 0 or 1: the planner draws one output length a request")
        require(request.HasField("job"), "job", "is required")
        job_file = job_from_proto(request.job, request.seed)
        job_id = request.job_id or f"{job_file.name}-{self._next_number()}"
        await self._slots.acquire()
        search = asyncio.ensure_future(asyncio.to_thread(self._plan, job_file, request))
        search.add_done_callback(lambda _: self._slots.release())
        try:
            plans = await asyncio.wait_for(asyncio.shield(search), self._timeout_s)
        except TimeoutError:
            raise SearchTimedOut(f"the search of {job_id} ran past the planner's {self._timeout_s:g} s "
                                 "(--plan-timeout-s); plan a smaller job or raise the limit") from None
        log.info("planned %s: %d stages, %.1f s estimated, searched in %.2f s", job_id, len(plans.samullm.stages),
                 plans.samullm.inference_s, plans.samullm.search_s)
        return plans_to_proto(job_id, job_file.job, plans)

    def _plan(self, job_file: JobFile, request: planner_pb2.PlanRequest) -> JobPlans:
        try:
            cdfs = resolve_cdfs(job_file, self._castillo)
            return plan_job(job_file, cdfs, time.perf_counter, not request.no_preemption, not request.skip_baselines)
        except InvalidField as error:
            raise InvalidField(f"job.{error.field}", error.rule) from error

    def _next_number(self) -> int:
        self._planned += 1
        return self._planned

    async def Run(self, request: planner_pb2.RunRequest, context: grpc.aio.ServicerContext) -> planner_pb2.RunResponse:
        raise Unimplemented("Run: running a plan on workers is not built yet; Plan is")

    async def Status(self, request: planner_pb2.StatusRequest, context: grpc.aio.ServicerContext) -> planner_pb2.StatusResponse:
        raise Unimplemented("Status: running a plan on workers is not built yet; Plan is")
