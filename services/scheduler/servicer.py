"""SchedulerService: the front door. Validates, tokenizes, places on a worker, relays the stream."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc

from forethought.cluster.registry import WorkerRegistry
from forethought.engine.backend import ServiceClass
from forethought.prefix.hashing import chained_block_hashes
from forethought.rpc import convert
from forethought.rpc.errors import AlreadyExists, NotFound, Unavailable, require
from forethought.routing.router import Router, RoutingRequest
from forethought.services.scheduler.pool import WorkerPool
from forethought.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc, tokenizer_pb2, tokenizer_pb2_grpc, worker_pb2

log = logging.getLogger(__name__)

MAX_PROMPT_TOKENS = 1 << 20
MAX_TOKENS_LIMIT = 1 << 16


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServiceServicer):
    def __init__(
        self,
        pool: WorkerPool,
        registry: WorkerRegistry,
        router: Router,
        match_prefix: Callable[[list[int]], Awaitable[dict[str, int]]],
        tokenizer: tokenizer_pb2_grpc.TokenizerServiceStub | None,
        block_size: int,
        heartbeat_ttl_s: float,
    ) -> None:
        self._pool = pool
        self._registry = registry
        self._router = router
        self._match_prefix = match_prefix
        self._tokenizer = tokenizer
        self._block_size = block_size
        self._heartbeat_ttl_s = heartbeat_ttl_s
        self._placed: dict[str, str] = {}  # live request id -> worker id

    async def Generate(
        self, request: scheduler_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[scheduler_pb2.GenerateResponse]:
        request_id = request.request_id or uuid.uuid4().hex
        if request_id in self._placed:
            raise AlreadyExists(f"request_id: {request_id!r} is already running")
        _validate(request)
        arrived = time.monotonic()
        token_ids = await self._prompt_tokens(request, context)
        worker_id = await self._place(request_id, request, token_ids)
        queued_s = time.monotonic() - arrived
        self._placed[request_id] = worker_id
        try:
            call = self._pool.stub(worker_id).Generate(
                _worker_request(request_id, request, token_ids), timeout=context.time_remaining()
            )
            first = True
            detokenize = self._detokenizer(request) if request.return_text else None
            try:
                async for chunk in call:
                    reply = scheduler_pb2.GenerateResponse(
                        request_id=request_id, token_ids=chunk.token_ids, finish_reason=chunk.finish_reason,
                    )
                    if detokenize is not None:
                        reply.text = chunk.text or await detokenize(list(chunk.token_ids))
                    if first:
                        reply.worker_id = worker_id
                        first = False
                    if chunk.HasField("usage"):
                        reply.usage.CopyFrom(chunk.usage)
                        reply.usage.queue_s += queued_s
                    yield reply
            except grpc.aio.AioRpcError as error:
                raise Unavailable(f"worker {worker_id} failed the request: {error.details()}; retry") from error
            finally:
                call.cancel()  # the client left or the stream ended: make sure the worker lets go
                if detokenize is not None:
                    await detokenize.aclose()
        finally:
            self._placed.pop(request_id, None)
            self._router.on_finished(request_id, time.monotonic())

    async def Cancel(self, request: scheduler_pb2.CancelRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.CancelResponse:
        require(bool(request.request_id), "request_id", "must be non-empty")
        worker_id = self._placed.get(request.request_id)
        if worker_id is None:
            return scheduler_pb2.CancelResponse(cancelled=False)
        reply = await self._pool.stub(worker_id).Abort(worker_pb2.AbortRequest(request_id=request.request_id), timeout=5)
        return scheduler_pb2.CancelResponse(cancelled=reply.aborted)

    async def ListWorkers(
        self, request: scheduler_pb2.ListWorkersRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.ListWorkersResponse:
        now = time.time()
        workers = [
            scheduler_pb2.WorkerInfo(
                worker_id=record.worker_id, address=record.address, model=record.model, engine=record.engine,
                capacity=record.capacity, health=_health(record.state, now - record.heartbeat_s, self._heartbeat_ttl_s),
                load=convert.load_to_proto(record.load), heartbeat_age_s=max(0.0, now - record.heartbeat_s),
            )
            for record in await self._registry.workers()
            if not request.model or record.model == request.model
        ]
        return scheduler_pb2.ListWorkersResponse(workers=workers)

    def _detokenizer(self, request: scheduler_pb2.GenerateRequest) -> "StreamDetokenizer | None":
        return StreamDetokenizer(self._tokenizer, request.model) if self._tokenizer is not None else None

    async def _prompt_tokens(self, request: scheduler_pb2.GenerateRequest, context: grpc.aio.ServicerContext) -> list[int]:
        which = request.WhichOneof("prompt")
        if which == "token_ids":
            return list(request.token_ids.ids)
        if self._tokenizer is None:
            raise Unavailable("text and chat prompts need the tokenizer service, which is not configured; send token_ids")
        try:
            if which == "chat":
                reply = await self._tokenizer.ApplyChatTemplate(
                    tokenizer_pb2.ApplyChatTemplateRequest(
                        model=request.model, messages=request.chat.messages, add_generation_prompt=True),
                    timeout=10,
                )
                return list(reply.token_ids)
            tokenized = await self._tokenizer.Tokenize(
                tokenizer_pb2.TokenizeRequest(model=request.model, texts=[request.text]), timeout=10
            )
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                raise NotFound(f"model: {error.details()}") from error
            raise Unavailable(f"tokenizer failed: {error.details()}; retry") from error
        return list(tokenized.token_ids[0].ids)

    async def _place(self, request_id: str, request: scheduler_pb2.GenerateRequest, token_ids: list[int]) -> str:
        candidates = self._pool.serving(request.model)
        if not candidates:
            if any(record.model == request.model for record in self._pool.records.values()):
                raise Unavailable(f"every worker serving {request.model!r} is draining; retry in 1 s")
            raise NotFound(f"model: no worker serves {request.model!r}")
        hashes = tuple(chained_block_hashes(token_ids, self._block_size))
        cached = await self._match_prefix(list(hashes)) if hashes else {}
        routing = RoutingRequest(
            request_id=request_id, prompt_tokens=len(token_ids), block_hashes=hashes, block_size=self._block_size,
            predicted_output_tokens=float(request.max_tokens),
            service_class=convert.service_class_from_proto(request.service_class),
            cached_blocks={worker: blocks for worker, blocks in cached.items() if worker in candidates},
        )
        return self._router.choose(routing, time.monotonic())


def _validate(request: scheduler_pb2.GenerateRequest) -> None:
    require(bool(request.model), "model", "must be non-empty")
    which = request.WhichOneof("prompt")
    require(which is not None, "prompt", "one of text, token_ids or chat is required")
    if which == "text":
        require(bool(request.text), "text", "must be non-empty")
    elif which == "token_ids":
        require(0 < len(request.token_ids.ids) <= MAX_PROMPT_TOKENS, "token_ids.ids", f"must hold 1..{MAX_PROMPT_TOKENS} ids")
        require(all(token >= 0 for token in request.token_ids.ids), "token_ids.ids", "must be >= 0")
    else:
        require(len(request.chat.messages) > 0, "chat.messages", "must be non-empty")
    require(1 <= request.max_tokens <= MAX_TOKENS_LIMIT, "max_tokens", f"must be in 1..{MAX_TOKENS_LIMIT}")
    convert.sampling_from_proto(request.sampling)
    if request.service_class == common_pb2.SERVICE_CLASS_REAL_TIME:
        require(request.slo.ttft_s > 0 or request.slo.tpot_s > 0, "slo", "a real-time request needs ttft_s or tpot_s > 0")
    require(request.slo.ttft_s >= 0 and request.slo.tpot_s >= 0, "slo", "objectives must be >= 0")


def _worker_request(request_id: str, request: scheduler_pb2.GenerateRequest, token_ids: list[int]) -> worker_pb2.WorkerServiceGenerateRequest:
    real_time = convert.service_class_from_proto(request.service_class) == ServiceClass.RT
    return worker_pb2.WorkerServiceGenerateRequest(
        request_id=request_id, prompt_token_ids=token_ids, max_tokens=request.max_tokens, sampling=request.sampling,
        service_class=request.service_class, slo=request.slo, priority=0 if real_time else 1,
    )


def _health(state: str, age_s: float, ttl_s: float) -> int:
    if state == "draining":
        return scheduler_pb2.WORKER_HEALTH_DRAINING
    if age_s > ttl_s / 2:
        return scheduler_pb2.WORKER_HEALTH_UNHEALTHY
    return scheduler_pb2.WORKER_HEALTH_SERVING


class StreamDetokenizer:
    """Turns a token stream into text through one DetokenizeStream call (no split UTF-8 characters)."""

    def __init__(self, tokenizer: tokenizer_pb2_grpc.TokenizerServiceStub, model: str) -> None:
        self._call = tokenizer.DetokenizeStream()
        self._model = model

    async def __call__(self, token_ids: list[int]) -> str:
        if not token_ids:
            return ""
        await self._call.write(tokenizer_pb2.DetokenizeStreamRequest(model=self._model, token_ids=token_ids))
        self._model = ""  # the model goes in the first message only
        reply = await self._call.read()
        return reply.text if reply is not grpc.aio.EOF else ""

    async def aclose(self) -> None:
        self._call.cancel()
