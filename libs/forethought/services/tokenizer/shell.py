"""Tokenizer: text <-> token ids for every served model, chat templates, streaming detokenization."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from forethought.config import ConfigError, ServiceSettings, option
from forethought.rpc.server import PlainService, ServiceSpec
from forethought.services.tokenizer.servicer import TokenizerServicer
from forethought.tokenize import (
    TokenizerRegistry,
    default_models,
)
from forethought.v1 import tokenizer_pb2_grpc


@dataclass(frozen=True)
class Settings(ServiceSettings):
    port: int = option(50052, "gRPC port; 0 picks a free one")
    models: str = option("", "extra models as name=folder,name=folder (Hugging Face tokenizer folders)")
    preload: bool = option(True, "load every tokenizer at start instead of on first use")

    def validate(self) -> None:
        super().validate()
        for entry in filter(None, self.models.split(",")):
            if "=" not in entry:
                raise ConfigError("models", "entries must be name=folder", entry)

    def model_sources(self) -> dict[str, str]:
        sources = default_models()
        for entry in filter(None, self.models.split(",")):
            name, _, folder = entry.partition("=")
            sources[name.strip()] = folder.strip()
        return sources


def build(settings: Settings) -> PlainService:
    registry = TokenizerRegistry(settings.model_sources())

    async def preload() -> None:
        if settings.preload:
            for model in registry.models:
                await asyncio.to_thread(registry.get, model)

    return PlainService(
        "forethought.v1.TokenizerService", tokenizer_pb2_grpc.add_TokenizerServiceServicer_to_server,
        TokenizerServicer(registry), preload,
    )


SERVICE = ServiceSpec("tokenizer", __doc__ or "", Settings, build)
