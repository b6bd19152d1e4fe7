"""Predictor: output-length forecasts from the SSJF proxy model (paper 002), as distributions.

Concurrent ``Predict`` calls share one model forward (a small wait window); ``Observe`` feeds the
length cache and the refit store; ``Reload`` swaps a model in atomically while predictions run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from forethought.cache import PREDICTOR_DIR
from forethought.config import ConfigError, MissingPrerequisite, ServiceSettings, option
from forethought.predict import (
    BatchingPredictor,
    Predictor,
)
from forethought.predict.artifact import UnreadableArtifact, artifact_problem
from forethought.predict.shipped import resolve_predictor
from forethought.rpc.server import PlainService, ServiceSpec
from forethought.services.predictor.metrics import observe_batch
from forethought.services.predictor.servicer import PredictorServicer
from forethought.v1 import predictor_pb2_grpc

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings(ServiceSettings):
    port: int = option(50053, "gRPC port; 0 picks a free one")
    model_dir: str = option("", f"predictor folder; empty = the fine-tuned one in {PREDICTOR_DIR} if there, else the shipped one")
    observations_path: str = option("", "JSONL file keeping observed lengths across restarts; empty = in memory")
    max_batch: int = option(32, "prompts in one model forward")
    max_wait_ms: float = option(5.0, "how long a call waits for others to share its forward")

    def validate(self) -> None:
        super().validate()
        problem = artifact_problem(Path(self.model_dir).expanduser()) if self.model_dir else None
        if problem is not None:
            raise ConfigError("model_dir", f"must hold a trained predictor ({problem}; run `forethought train-predictor`)", self.model_dir)
        if self.max_batch < 1:
            raise ConfigError("max_batch", "must be >= 1", self.max_batch)
        if self.max_wait_ms < 0:
            raise ConfigError("max_wait_ms", "must be >= 0", self.max_wait_ms)


def build(settings: Settings) -> PlainService:
    choice = resolve_predictor(Path(settings.model_dir) if settings.model_dir else None)
    log.info("forecasting with the %s", choice.description)
    observations = Path(settings.observations_path).expanduser() if settings.observations_path else None
    try:
        predictor = Predictor.load(choice.directory, observations_path=observations)
    except UnreadableArtifact as error:
        if settings.model_dir:
            raise ConfigError("model_dir", f"must hold a predictor that loads: {error}", settings.model_dir) from error
        raise MissingPrerequisite(f"the {choice.description} does not load: {error}") from error
    # the first forecast would otherwise record the traced forward, past the scheduler's forecast timeout
    predictor.warm_up()
    batching = BatchingPredictor(predictor.predict, max_batch=settings.max_batch, max_wait_s=settings.max_wait_ms / 1000,
                                 on_forward=observe_batch)
    return PlainService(
        "forethought.v1.PredictorService", predictor_pb2_grpc.add_PredictorServiceServicer_to_server,
        PredictorServicer(predictor, batching),
    )


SERVICE = ServiceSpec("predictor", __doc__ or "", Settings, build)
