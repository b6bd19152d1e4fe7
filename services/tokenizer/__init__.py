"""Tokenizer: text <-> token ids for every served model, chat templates, streaming detokenization."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc

from forethought.config import ConfigError, ServiceSettings, option
from forethought.rpc.errors import NotFound, require
from forethought.rpc.server import PlainService
from forethought.tokenize import IncrementalDetokenizer, ModelTokenizer, TokenizerRegistry, UnknownModel, default_models
from forethought.v1 import common_pb2, tokenizer_pb2, tokenizer_pb2_grpc

MAX_BATCH = 256
MAX_TEXT_CHARS = 4 * 1024 * 1024


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


class TokenizerServicer(tokenizer_pb2_grpc.TokenizerServiceServicer):
    def __init__(self, registry: TokenizerRegistry) -> None:
        self._registry = registry

    def _tokenizer(self, model: str) -> ModelTokenizer:
        require(bool(model), "model", "must be non-empty")
        try:
            return self._registry.get(model)
        except UnknownModel as error:
            raise NotFound(f"model: {error}") from error

    async def Tokenize(self, request: tokenizer_pb2.TokenizeRequest, context: grpc.aio.ServicerContext) -> tokenizer_pb2.TokenizeResponse:
        tokenizer = self._tokenizer(request.model)
        require(1 <= len(request.texts) <= MAX_BATCH, "texts", f"must hold 1..{MAX_BATCH} texts")
        require(all(len(text) <= MAX_TEXT_CHARS for text in request.texts), "texts", f"each text must be at most {MAX_TEXT_CHARS} characters")
        ids = await asyncio.to_thread(tokenizer.encode_batch, list(request.texts), request.add_special_tokens)
        return tokenizer_pb2.TokenizeResponse(token_ids=[common_pb2.TokenIds(ids=row) for row in ids])

    async def Detokenize(self, request: tokenizer_pb2.DetokenizeRequest, context: grpc.aio.ServicerContext) -> tokenizer_pb2.DetokenizeResponse:
        tokenizer = self._tokenizer(request.model)
        require(1 <= len(request.token_ids) <= MAX_BATCH, "token_ids", f"must hold 1..{MAX_BATCH} lists")
        rows = [list(row.ids) for row in request.token_ids]
        require(all(0 <= token < tokenizer.vocab_size for row in rows for token in row), "token_ids",
                f"ids must be in 0..{tokenizer.vocab_size - 1}")
        texts = await asyncio.to_thread(tokenizer.decode_batch, rows, request.skip_special_tokens)
        return tokenizer_pb2.DetokenizeResponse(texts=texts)

    async def ApplyChatTemplate(
        self, request: tokenizer_pb2.ApplyChatTemplateRequest, context: grpc.aio.ServicerContext
    ) -> tokenizer_pb2.ApplyChatTemplateResponse:
        tokenizer = self._tokenizer(request.model)
        require(len(request.messages) > 0, "messages", "must be non-empty")
        require(all(message.role in ("system", "user", "assistant") for message in request.messages),
                "messages.role", "must be system, user or assistant")
        messages = [{"role": message.role, "content": message.content} for message in request.messages]
        prompt = await asyncio.to_thread(tokenizer.apply_chat_template, messages, request.add_generation_prompt)
        return tokenizer_pb2.ApplyChatTemplateResponse(text=prompt.text, token_ids=prompt.token_ids)

    async def DetokenizeStream(
        self, requests: AsyncIterator[tokenizer_pb2.DetokenizeStreamRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[tokenizer_pb2.DetokenizeStreamResponse]:
        detokenizer: IncrementalDetokenizer | None = None
        async for request in requests:
            if detokenizer is None:
                detokenizer = IncrementalDetokenizer(self._tokenizer(request.model))
            yield tokenizer_pb2.DetokenizeStreamResponse(text=detokenizer.feed(list(request.token_ids)))
        if detokenizer is not None:
            tail = detokenizer.flush()
            if tail:
                yield tokenizer_pb2.DetokenizeStreamResponse(text=tail)


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
