"""SchedulerService: the front door. Validate, tokenize, forecast, queue, place, relay, fail over.

The decisions live in ``forethought.scheduling`` (driven by ``PlacementLoop``); this module only
translates protobuf and streams. A request naming an application run (``application_id``, ``step``)
is a step of that run: ``ApplicationRuns`` checks its order and gives it the run's rank (Hermes).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable

import grpc

from forethought.cluster.registry import WorkerRegistry
from forethought.domain import GenerationRequest, chained_block_hashes, require
from forethought.queueing import QueuedRequest
from forethought.rpc import convert
from forethought.rpc.errors import (
    AlreadyExists,
    NotFound,
    Unavailable,
    invalid_argument_of,
)
from forethought.scheduling import WORKER_LOSS_CODES, PlacementStatus, ScheduledRequest
from forethought.scheduling.resume import continuation, resumable
from forethought.services.scheduler.applications import ApplicationRuns, StepTicket
from forethought.services.scheduler.forecasts import (
    Forecast,
    ForecastClient,
    ForecastPrompt,
)
from forethought.services.scheduler.owners import RequestOwners
from forethought.services.scheduler.placement import PlacementLoop, RequestWithdrawn
from forethought.services.scheduler.pool import WorkerPool
from forethought.services.scheduler.requests import (
    PromptTokens,
    StreamDetokenizer,
    forecast_prompt,
    generation_of,
    health_of,
    validate,
)
from forethought.services.scheduler.tenancy import CALLER_TENANT
from forethought.telemetry.metrics import RESUMED_STREAMS
from forethought.telemetry.tracing import trace_metadata
from forethought.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2

log = logging.getLogger(__name__)


class WorkerLost(Exception):
    """The request's worker left the registry while the request was on it."""


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServiceServicer):
    def __init__(self, pool: WorkerPool, registry: WorkerRegistry, placement: PlacementLoop,
                 forecasts: ForecastClient, prompt_tokens: PromptTokens, applications: ApplicationRuns, block_size: int,
                 heartbeat_ttl_s: float, resume_streams: bool = True, max_resumes: int = 2,
                 owners: RequestOwners | None = None, clock: Callable[[], float] = time.time) -> None:
        self._pool = pool
        self._registry = registry
        self._placement = placement
        self._forecasts = forecasts
        self._prompt_tokens = prompt_tokens
        self._applications = applications
        self._block_size = block_size
        self._heartbeat_ttl_s = heartbeat_ttl_s
        self._resume_streams = resume_streams
        self._max_resumes = max_resumes
        self._owners = owners
        self._clock = clock

    async def Generate(
        self, request: scheduler_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[scheduler_pb2.GenerateResponse]:
        validate(request)
        request_id = request.request_id or uuid.uuid4().hex
        if self._placement.find(request_id) is not None:
            raise AlreadyExists(f"request_id: {request_id!r} is already running")
        self._require_workers(request.model)
        arrived = self._clock()
        token_ids = await self._prompt_tokens.of(request)
        prompt = forecast_prompt(request)
        generation = generation_of(request, request_id, token_ids)
        forecast = await self._forecasts.forecast(prompt, request.model)
        ticket = (await self._applications.begin_step(
            request.application_id, request.step, request_id, len(token_ids), forecast.mean_tokens,
            request.execution if request.HasField("execution") else None) if request.application_id else None)
        try:
            scheduled = self._scheduled(request, generation, forecast, arrived, ticket)
            waiter = self._placement.submit(scheduled)
        except BaseException:
            if ticket is not None:
                self._applications.end_step(ticket, request_id, None)
            raise
        if self._owners is not None:
            self._owners.hold(request_id)
        # One detokenizer for the whole stream, so a resumed stream's text joins the text already sent.
        detokenize = self._prompt_tokens.detokenizer(request.model) if request.return_text else None
        delivered: list[int] = []  # output token ids the client has been sent
        resumes = 0
        try:
            while True:
                try:
                    worker_id = await waiter
                except RequestWithdrawn:
                    yield scheduler_pb2.GenerateResponse(request_id=request_id, finish_reason=common_pb2.FINISH_REASON_ABORT)
                    return
                call: grpc.aio.UnaryStreamCall | None = None
                try:
                    call = self._worker_call(worker_id, scheduled, context)
                    async for reply in self._relay(scheduled, call, prompt, ticket, detokenize, delivered):
                        yield reply
                    return
                except grpc.aio.AioRpcError as error:
                    if error.code().name not in WORKER_LOSS_CODES:
                        self._placement.finish(scheduled, None)
                        if error.code() == grpc.StatusCode.INVALID_ARGUMENT:  # the request is at fault: no retry helps
                            raise invalid_argument_of(error) from error
                        raise Unavailable(f"worker {worker_id} failed the request: {error.code().name}: {error.details()}") from error
                    lost: Exception = error
                except asyncio.CancelledError:
                    # The pool closing a departed worker's channel cancels its calls; the client leaving
                    # cancels this handler, which must go on unwinding.
                    if self._pool.connected(worker_id) or _being_cancelled():
                        raise
                    lost = WorkerLost(f"worker {worker_id} left the registry (heartbeat expired) mid-request")
                except WorkerLost as error:
                    lost = error
                finally:
                    if call is not None:
                        call.cancel()  # the client left or the stream ended: make sure the worker lets go
                mid_stream = scheduled.status is PlacementStatus.STREAMING
                decision, retry = self._placement.worker_lost(scheduled)
                if retry is not None:
                    waiter = retry
                    continue
                rest = continuation(generation, delivered) if mid_stream and self._resume_streams else None
                if rest is None or resumes >= self._max_resumes:
                    why = "" if resumable(generation) else (" (its decoding is neither greedy nor seeded, or it penalises "
                                                            "generated tokens: not resumable)")
                    raise Unavailable(f"request {request_id}: {decision.reason}; {len(delivered)} tokens were delivered{why}; "
                                      "retry the request") from lost
                resumes += 1
                RESUMED_STREAMS.labels(request.model).inc()
                log.warning("request %s: %s; resuming after %d delivered tokens", request_id, decision.reason, len(delivered))
                scheduled = self._scheduled(request, rest, forecast, arrived, ticket)
                waiter = self._placement.submit(scheduled)
        finally:
            self._release(scheduled)
            if self._owners is not None:
                self._owners.release(request_id)
            if detokenize is not None:
                await detokenize.aclose()
            if ticket is not None:
                self._applications.end_step(ticket, request_id, scheduled.output_tokens)

    def _worker_call(self, worker_id: str, scheduled: ScheduledRequest,
                     context: grpc.aio.ServicerContext) -> grpc.aio.UnaryStreamCall:
        """The request's stream on its worker; WorkerLost when the worker left the registry since placement."""
        try:
            stub = self._pool.stub(worker_id)
        except KeyError:
            raise WorkerLost(f"worker {worker_id} left the registry before the call") from None
        return stub.Generate(convert.generation_to_proto(scheduled.worker_request()), timeout=context.time_remaining(),
                             metadata=trace_metadata())

    async def _relay(self, scheduled: ScheduledRequest, call: grpc.aio.UnaryStreamCall, prompt: ForecastPrompt,
                     ticket: StepTicket | None, detokenize: StreamDetokenizer | None,
                     delivered: list[int]) -> AsyncIterator[scheduler_pb2.GenerateResponse]:
        """Relays the worker's stream; ``delivered`` grows by every token sent. After a resume the request
        is a continuation, and its usage is told as the whole request's."""
        earlier = len(delivered)  # tokens sent before this attempt: part of this attempt's prompt
        output_tokens = None
        async for chunk in call:
            reply = scheduler_pb2.GenerateResponse(request_id=scheduled.request_id, token_ids=chunk.token_ids,
                                                   finish_reason=chunk.finish_reason, logprobs=chunk.logprobs,
                                                   prompt_logprobs=chunk.prompt_logprobs)
            if detokenize is not None:
                # The engine's own text when it has one: only the engine knows what a stop string cut.
                last = chunk.finish_reason != common_pb2.FINISH_REASON_UNSPECIFIED
                reply.text = chunk.text if chunk.HasField("text") else await detokenize(list(chunk.token_ids), last=last)
            if scheduled.status is PlacementStatus.DISPATCHED:
                reply.worker_id = scheduled.worker_id
                reply.predicted_output_tokens = scheduled.queued.predicted_output_tokens
                self._placement.first_token(scheduled)
                if ticket is not None:
                    self._applications.first_token(ticket, scheduled.request_id)
            if chunk.HasField("usage"):
                reply.usage.CopyFrom(chunk.usage)
                reply.usage.queue_s += max(0.0, scheduled.dispatched_s - scheduled.queued.arrival_s)
                reply.usage.prompt_tokens -= earlier
                reply.usage.output_tokens += earlier
                output_tokens = reply.usage.output_tokens
            delivered.extend(chunk.token_ids)
            yield reply
        scheduled.output_tokens = output_tokens
        self._placement.finish(scheduled, output_tokens)
        if output_tokens is not None:
            self._forecasts.observe(prompt, output_tokens, scheduled.model)

    def _release(self, scheduled: ScheduledRequest) -> None:
        """The handler ends (done, failed or the client left): nothing of the request may linger."""
        if scheduled.status.is_finished:
            return
        if scheduled.status.on_worker:
            self._placement.finish(scheduled, None)
        else:
            self._placement.withdraw(scheduled)

    async def Cancel(self, request: scheduler_pb2.CancelRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.CancelResponse:
        require(bool(request.request_id), "request_id", "must be non-empty")
        if self._placement.find(request.request_id) is None and self._owners is not None:
            return scheduler_pb2.CancelResponse(cancelled=await self._owners.forward_cancel(request.request_id))
        return scheduler_pb2.CancelResponse(cancelled=await self.cancel_held(request.request_id))

    async def cancel_held(self, request_id: str) -> bool:
        """Cancels a request this replica holds; False when it is unknown here or already finished."""
        scheduled = self._placement.find(request_id)
        if scheduled is None:
            return False
        running = self._placement.withdraw(scheduled)
        if running is None:
            return True
        try:
            reply = await self._pool.stub(running.worker_id).Abort(
                worker_pb2.AbortRequest(request_id=request_id), timeout=5, metadata=trace_metadata())
        except (KeyError, grpc.aio.AioRpcError) as error:
            raise Unavailable(f"could not reach worker {running.worker_id} to abort: {error}; retry") from error
        return bool(reply.aborted)

    async def SubmitApplication(self, request: scheduler_pb2.SubmitApplicationRequest,
                                context: grpc.aio.ServicerContext) -> scheduler_pb2.SubmitApplicationResponse:
        return await self._applications.submit(request)

    async def ReportStep(self, request: scheduler_pb2.ReportStepRequest,
                         context: grpc.aio.ServicerContext) -> scheduler_pb2.ReportStepResponse:
        return await self._applications.report_step(request)

    async def FinishApplication(self, request: scheduler_pb2.FinishApplicationRequest,
                                context: grpc.aio.ServicerContext) -> scheduler_pb2.FinishApplicationResponse:
        return await self._applications.finish(request)

    async def WatchApplication(self, request: scheduler_pb2.WatchApplicationRequest,
                               context: grpc.aio.ServicerContext) -> AsyncIterator[scheduler_pb2.WatchApplicationResponse]:
        async for message in self._applications.watch(request.run_id):
            yield message

    async def ListWorkers(
        self, request: scheduler_pb2.ListWorkersRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.ListWorkersResponse:
        now = self._clock()
        workers = [
            scheduler_pb2.WorkerInfo(
                worker_id=record.worker_id, address=record.address, model=record.model, engine=record.engine,
                capacity=record.capacity, health=health_of(record.state, now - record.heartbeat_s, self._heartbeat_ttl_s),
                load=convert.load_to_proto(record.load), heartbeat_age_s=max(0.0, now - record.heartbeat_s),
            )
            for record in await self._registry.workers()
            if not request.model or record.model == request.model
        ]
        return scheduler_pb2.ListWorkersResponse(workers=workers)

    def _require_workers(self, model: str) -> None:
        if self._pool.serves(model):
            return
        if any(record.model == model for record in self._pool.records.values()):
            raise Unavailable(f"every worker serving {model!r} is draining; retry in 1 s")
        raise NotFound(f"model: no worker serves {model!r}")

    def _scheduled(self, request: scheduler_pb2.GenerateRequest, generation: GenerationRequest,
                   forecast: Forecast, arrived: float, ticket: StepTicket | None) -> ScheduledRequest:
        queued = QueuedRequest(
            request_id=generation.request_id, arrival_s=arrived, prompt_tokens=len(generation.prompt_token_ids),
            predicted_output_tokens=forecast.mean_tokens, predicted_quantiles=forecast.quantiles,
            service_class=generation.service_class, ttft_slo_s=generation.ttft_slo_s,
            deadline_s=(convert.seconds_of(request.deadline, "deadline") if request.HasField("deadline")
                        else ticket.deadline_s if ticket is not None else 0.0),
            application_id=request.application_id,
            application_rank=ticket.rank.gittins_rank if ticket is not None else None,
            application_remaining_s=ticket.rank.remaining_s if ticket is not None else None,
            tenant=CALLER_TENANT.get(),
        )
        hashes = tuple(chained_block_hashes(generation.prompt_token_ids, self._block_size))
        return ScheduledRequest(queued, request.model, hashes, self._block_size, generation)
