"""WorkerService: protobuf in, the model's engine and the prewarm agent, protobuf out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import grpc

from forethought.backends.protocol import EngineBackend
from forethought.domain import GenerationRequest, require, validate_generation
from forethought.prewarm import PrewarmAgent, PrewarmKind, PrewarmResult, PrewarmStatus
from forethought.rpc import convert
from forethought.rpc.errors import AlreadyExists, FailedPrecondition, NotFound
from forethought.telemetry.metrics import SERVICE_CLASS_LABELS, WORKER_TTFT
from forethought.v1 import worker_pb2, worker_pb2_grpc

MIN_STATS_INTERVAL_S = 0.05
MAX_STATS_INTERVAL_S = 60.0
_STATUS_TO_PROTO = {
    PrewarmStatus.READY: worker_pb2.PREWARM_STATUS_READY,
    PrewarmStatus.UNSUPPORTED: worker_pb2.PREWARM_STATUS_UNSUPPORTED,
    PrewarmStatus.FAILED: worker_pb2.PREWARM_STATUS_FAILED,
}


def fitted(request: GenerationRequest, limit: int) -> GenerationRequest:
    """The request with ``max_tokens`` lowered so its prompt plus output fit in ``limit``, when it asks for that
    (``fit_max_tokens``) and its prompt leaves room; otherwise unchanged."""
    room = limit - len(request.prompt_token_ids)
    if request.fit_max_tokens and 0 < room < request.max_tokens:
        return replace(request, max_tokens=room)
    return request


def require_servable(request: GenerationRequest, engine: EngineBackend) -> None:
    """Raises InvalidArgument, naming the field, when the engine could never serve the request as asked."""
    require(engine.detokenizes or not request.sampling.stop, "sampling.stop",
            "stop strings need an engine that makes text; this worker's engine makes token ids only: "
            "use sampling.stop_token_ids")
    for name in ("logprobs", "prompt_logprobs", "structured_output"):
        require(engine.runs_model or getattr(request.sampling, name) is None, f"sampling.{name}",
                "this worker's engine runs no model (the sim and null engines model time), so it computes no token "
                "probabilities and holds no answer to a form")
    limit = engine.max_request_tokens
    prompt = len(request.prompt_token_ids)
    require(prompt < limit, "prompt_token_ids", f"holds {prompt} tokens; this worker's engine serves at most {limit} "
            "tokens of prompt plus max_tokens")
    require(prompt + request.max_tokens <= limit, "max_tokens",
            f"must be at most {limit - prompt}: the prompt's {prompt} tokens plus max_tokens may not pass {limit}, "
            "the longest request this worker's engine serves")
    vocabulary = engine.vocabulary_size
    if vocabulary is not None:
        rule = f"must be token ids of this worker's model, 0..{vocabulary - 1}"
        require(max(request.prompt_token_ids) < vocabulary, "prompt_token_ids", rule)
        require(all(token_id < vocabulary for token_id in request.sampling.stop_token_ids), "sampling.stop_token_ids", rule)


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):
    """Streams generation from a loaded model's engine; the caller's cancel aborts the request there."""

    def __init__(self, agent: PrewarmAgent, primary_model: str, devices: int = 1) -> None:
        self.worker_id = ""  # known once the server listens
        self._agent = agent
        self._primary = primary_model
        self._devices = devices
        self._live: dict[str, EngineBackend] = {}
        self.tensor_parallel: dict[str, int] = {primary_model: 1}
        """The tensor-parallel degree each model was loaded with; the engine factory reads it."""

    def _engine(self, model: str, field: str = "model") -> tuple[str, EngineBackend]:
        name = model or self._primary
        engine = self._agent.lifecycle.engine(name)
        if engine is None:
            raise NotFound(f"{field}: {name!r} is not loaded on this worker (loaded: {', '.join(self._agent.lifecycle.loaded())})")
        return name, engine

    async def Generate(
        self, request: worker_pb2.WorkerServiceGenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.WorkerServiceGenerateResponse]:
        engine_request = validate_generation(convert.generation_from_proto(request))
        model, engine = self._engine(request.model)
        engine_request = fitted(engine_request, engine.max_request_tokens)
        require_servable(engine_request, engine)
        if engine_request.request_id in self._live:
            raise AlreadyExists(f"request_id: {engine_request.request_id!r} is already running on this worker")
        self._live[engine_request.request_id] = engine
        self._agent.use_prefix(model, engine_request.prompt_token_ids)
        if engine_request.lora_name:
            self._agent.use(PrewarmKind.LORA, engine_request.lora_name)
        arrived = time.monotonic()
        waiting_first_token = True
        try:
            async for chunk in engine.generate(engine_request):
                if waiting_first_token and chunk.token_ids:
                    waiting_first_token = False
                    WORKER_TTFT.labels(model, SERVICE_CLASS_LABELS[engine_request.service_class]).observe(time.monotonic() - arrived)
                reply = worker_pb2.WorkerServiceGenerateResponse(
                    request_id=chunk.request_id, token_ids=list(chunk.token_ids),
                    finish_reason=convert.finish_to_proto(chunk.finish_reason),
                )
                if engine.detokenizes:
                    reply.text = chunk.text
                if chunk.usage is not None:
                    reply.usage.CopyFrom(convert.usage_to_proto(chunk.usage))
                if chunk.logprobs:
                    reply.logprobs.extend(convert.logprobs_to_proto(chunk.logprobs))
                if chunk.prompt_logprobs:
                    reply.prompt_logprobs.extend(convert.logprobs_to_proto(chunk.prompt_logprobs))
                yield reply
        finally:
            self._live.pop(engine_request.request_id, None)

    async def Abort(self, request: worker_pb2.AbortRequest, context: grpc.aio.ServicerContext) -> worker_pb2.AbortResponse:
        require(bool(request.request_id), "request_id", "must be non-empty")
        engine = self._live.get(request.request_id)
        return worker_pb2.AbortResponse(aborted=engine is not None and await engine.abort(request.request_id))

    async def Prewarm(self, request: worker_pb2.PrewarmRequest, context: grpc.aio.ServicerContext) -> worker_pb2.PrewarmResponse:
        kind = request.kind
        if kind == worker_pb2.PREWARM_KIND_KV_PREFIX:
            require(len(request.prefix_token_ids) > 0, "prefix_token_ids", "must be non-empty for KV_PREFIX")
            model, _ = self._engine(request.model)
            result = await self._agent.prewarm_prefix(model, list(request.prefix_token_ids))
        elif kind == worker_pb2.PREWARM_KIND_LORA:
            require(bool(request.target), "target", "must name the adapter for LORA")
            require(bool(request.lora_path), "lora_path", "must be the adapter's folder for LORA")
            model, _ = self._engine(request.model)
            result = await self._agent.prewarm_lora(model, request.target, request.lora_path)
        elif kind == worker_pb2.PREWARM_KIND_MODEL:
            require(bool(request.target), "target", "must name the model for MODEL")
            result = await self._agent.prewarm_model(request.target)
        elif kind == worker_pb2.PREWARM_KIND_TOOL:
            require(bool(request.target), "target", f"must be a launcher kind: {', '.join(self._agent.tools)}")
            result = await self._agent.prewarm_tool(request.target)
        else:
            require(False, "kind", "must be KV_PREFIX, LORA, MODEL or TOOL")
        return _prewarm_reply(result)

    async def LoadModel(self, request: worker_pb2.LoadModelRequest, context: grpc.aio.ServicerContext) -> worker_pb2.LoadModelResponse:
        require(bool(request.model), "model", "must be non-empty")
        tp = request.tensor_parallel_size or 1
        require(1 <= tp <= self._devices, "tensor_parallel_size",
                f"must be 0 (one device) or 1..{self._devices}: this worker has {self._devices} device(s)")
        held = self.tensor_parallel.get(request.model)
        # A start in progress counts: a second degree would be reported but never used by that start.
        if held is not None and held != tp and (request.model == self._primary or self._agent.lifecycle.holds(request.model)):
            raise FailedPrecondition(f"tensor_parallel_size: {request.model!r} runs on this worker with {held}, "
                                     f"not {tp}; unload it first")
        self.tensor_parallel[request.model] = tp  # the engine factory reads it when the load starts
        # NOTE: this call's wait (0 when the model runs already), not the model's last load time.
        try:
            waited = await self._agent.lifecycle.load(request.model)
        except FileNotFoundError as missing:  # an engine that loads weights (vLLM) found none under this name
            raise NotFound(f"model: {missing}") from None
        finally:
            self._forget_unheld(request.model)
        return worker_pb2.LoadModelResponse(load_s=waited, tensor_parallel_size=tp)

    async def UnloadModel(
        self, request: worker_pb2.UnloadModelRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.UnloadModelResponse:
        require(bool(request.model), "model", "must be non-empty")
        if request.model == self._primary:
            raise FailedPrecondition(f"model: {request.model!r} is this worker's primary model; stop the worker instead")
        unloaded = await self._agent.lifecycle.unload(request.model)
        self._forget_unheld(request.model)
        return worker_pb2.UnloadModelResponse(unloaded=unloaded)

    def _forget_unheld(self, model: str) -> None:
        """Drops the degree of a model neither running nor starting (a failed load, an unload), so that
        LoadModel calls naming models that never load leave nothing behind."""
        if model != self._primary and not self._agent.lifecycle.holds(model):
            self.tensor_parallel.pop(model, None)

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
        _, engine = self._engine("")
        metrics = self._agent.metrics()
        return worker_pb2.StatsResponse(
            worker_id=self.worker_id, model=self._primary, load=convert.load_to_proto(engine.stats()),
            prewarm_hits=metrics.hits, prewarm_wasted=metrics.wasted, prewarm_wasted_s=metrics.wasted_idle_s,
        )


def _prewarm_reply(result: PrewarmResult) -> worker_pb2.PrewarmResponse:
    return worker_pb2.PrewarmResponse(status=_STATUS_TO_PROTO[result.status], warmup_s=result.warmup_s, detail=result.reason)
