"""PredictorService: protobuf in, the served predictor (SSJF section 3) and its batching, protobuf out.

Forecasts and observations are for the request's served model (empty: the default one).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc

from forethought.domain import InvalidField, require
from forethought.predict import (
    BatchingPredictor,
    ConversationHistory,
    LengthForecast,
    Predictor,
)
from forethought.predict.artifact import UnreadableArtifact, artifact_problem
from forethought.rpc.errors import FailedPrecondition
from forethought.services.predictor.metrics import observe_prompts
from forethought.v1 import predictor_pb2, predictor_pb2_grpc

MAX_PROMPTS = 64
MAX_MODEL_CHARS = 256


def distribution_to_proto(forecast: LengthForecast) -> predictor_pb2.LengthDistribution:
    return predictor_pb2.LengthDistribution(
        mean=forecast.mean,
        quantiles=[predictor_pb2.Quantile(percent=percent, tokens=tokens) for percent, tokens in sorted(forecast.quantiles.items())],
        bucket=forecast.bucket, histogram=list(forecast.histogram), bucket_edges=list(forecast.bucket_edges),
        source=predictor_pb2.PREDICTION_SOURCE_LENGTH_CACHE if forecast.source == "cache" else predictor_pb2.PREDICTION_SOURCE_MODEL,
    )


def history_from_proto(history: predictor_pb2.ConversationHistory) -> ConversationHistory:
    return ConversationHistory(tuple(history.earlier_answer_chars))


class PredictorServicer(predictor_pb2_grpc.PredictorServiceServicer):
    def __init__(self, predictor: Predictor, batching: BatchingPredictor) -> None:
        self._predictor = predictor
        self._batching = batching
        self._reloading = asyncio.Lock()

    async def Predict(self, request: predictor_pb2.PredictRequest, context: grpc.aio.ServicerContext) -> predictor_pb2.PredictResponse:
        require(1 <= len(request.prompts) <= MAX_PROMPTS, "prompts", f"must hold 1..{MAX_PROMPTS} prompts")
        require(len(request.model) <= MAX_MODEL_CHARS, "model", f"must be at most {MAX_MODEL_CHARS} characters")
        histories = [history_from_proto(history) for history in request.histories] or None
        started = time.perf_counter()
        forecasts = await self._batching.predict_many(list(request.prompts), histories, request.model)
        observe_prompts(time.perf_counter() - started, len(forecasts))
        return predictor_pb2.PredictResponse(
            forecasts=[distribution_to_proto(forecast) for forecast in forecasts], model_version=str(self._predictor.version)
        )

    async def Observe(self, request: predictor_pb2.ObserveRequest, context: grpc.aio.ServicerContext) -> predictor_pb2.ObserveResponse:
        require(request.output_tokens >= 0, "output_tokens", "must be >= 0")
        require(len(request.model) <= MAX_MODEL_CHARS, "model", f"must be at most {MAX_MODEL_CHARS} characters")
        await asyncio.to_thread(
            self._predictor.observe, request.prompt, request.output_tokens, history_from_proto(request.history), request.model
        )
        return predictor_pb2.ObserveResponse(stored=len(self._predictor.store))

    async def Reload(self, request: predictor_pb2.ReloadRequest, context: grpc.aio.ServicerContext) -> predictor_pb2.ReloadResponse:
        source = request.WhichOneof("source")
        require(source is not None, "source", "one of model_dir or refit_head is required")
        async with self._reloading:  # one swap at a time; predictions go on meanwhile
            if source == "model_dir":
                folder = Path(request.model_dir).expanduser()
                try:
                    problem = artifact_problem(folder)
                except (OSError, ValueError) as error:  # a name too long, a NUL byte: no folder at all
                    problem = f"not a readable path: {error}"
                require(problem is None, "model_dir", f"must be a trained predictor folder of this version ({problem})")
                try:
                    version = await asyncio.to_thread(self._predictor.reload, folder)
                except UnreadableArtifact as error:  # the one serving goes on
                    raise InvalidField("model_dir", f"must hold a predictor that loads ({error})") from error
            else:
                require(request.refit_head, "refit_head", "must be true when set")
                try:
                    await asyncio.to_thread(self._predictor.refit)
                except ValueError as error:
                    raise FailedPrecondition(f"refit_head: {error}") from error
                version = self._predictor.version
        return predictor_pb2.ReloadResponse(model_version=str(version))
