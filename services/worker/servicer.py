"""WorkerService: protobuf in, the engine backend and prewarm agent, protobuf out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from forethought.engine.backend import EngineBackend, GenerationRequest
from forethought.rpc import convert
from forethought.rpc.errors import AlreadyExists, require
from forethought.v1 import worker_pb2, worker_pb2_grpc

MIN_STATS_INTERVAL_S = 0.05
MAX_STATS_INTERVAL_S = 60.0


def request_from_proto(message: worker_pb2.WorkerServiceGenerateRequest) -> GenerationRequest:
    """A validated engine request; raises InvalidArgument naming the field."""
    require(bool(message.request_id), "request_id", "must be non-empty")
    require(len(message.prompt_token_ids) > 0, "prompt_token_ids", "must be non-empty")
    require(all(token >= 0 for token in message.prompt_token_ids), "prompt_token_ids", "must be >= 0")
    require(message.max_tokens >= 1, "max_tokens", "must be >= 1")
    require(message.slo.ttft_s >= 0 and message.slo.tpot_s >= 0, "slo", "objectives must be >= 0")
    return GenerationRequest(
        request_id=message.request_id,
        prompt_token_ids=tuple(message.prompt_token_ids),
        max_tokens=message.max_tokens,
        service_class=convert.service_class_from_proto(message.service_class),
        priority=message.priority,
        ttft_slo_s=message.slo.ttft_s,
        tpot_slo_s=message.slo.tpot_s,
        sampling=convert.sampling_from_proto(message.sampling),
        lora_name=message.lora_adapter,
    )


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):
    """Streams generation from the engine; the caller's cancel aborts the request there."""

    def __init__(self, engine: EngineBackend) -> None:
        self.worker_id = ""  # known once the server listens
        self._engine = engine
        self._live: set[str] = set()

    @property
    def in_flight(self) -> int:
        return len(self._live)

    async def Generate(
        self, request: worker_pb2.WorkerServiceGenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.WorkerServiceGenerateResponse]:
        engine_request = request_from_proto(request)
        if engine_request.request_id in self._live:
            raise AlreadyExists(f"request_id: {engine_request.request_id!r} is already running on this worker")
        self._live.add(engine_request.request_id)
        try:
            async for chunk in self._engine.generate(engine_request):
                reply = worker_pb2.WorkerServiceGenerateResponse(
                    request_id=chunk.request_id, token_ids=list(chunk.token_ids), text=chunk.text,
                    finish_reason=convert.finish_to_proto(chunk.finish_reason),
                )
                if chunk.usage is not None:
                    reply.usage.CopyFrom(convert.usage_to_proto(chunk.usage))
                yield reply
        finally:
            self._live.discard(engine_request.request_id)

    async def Abort(self, request: worker_pb2.AbortRequest, context: grpc.aio.ServicerContext) -> worker_pb2.AbortResponse:
        require(bool(request.request_id), "request_id", "must be non-empty")
        return worker_pb2.AbortResponse(aborted=await self._engine.abort(request.request_id))

    async def Stats(
        self, request: worker_pb2.StatsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.StatsResponse]:
        interval = request.interval_s or 1.0
        require(MIN_STATS_INTERVAL_S <= interval <= MAX_STATS_INTERVAL_S, "interval_s",
                f"must be 0 (1 s) or in {MIN_STATS_INTERVAL_S}..{MAX_STATS_INTERVAL_S}")
        while True:
            yield self.stats_message()
            await asyncio.sleep(interval)

    def stats_message(self) -> worker_pb2.StatsResponse:
        return worker_pb2.StatsResponse(
            worker_id=self.worker_id, model=self._engine.model, load=convert.load_to_proto(self._engine.stats())
        )
