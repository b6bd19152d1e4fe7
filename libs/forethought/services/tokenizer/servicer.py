"""TokenizerService: protobuf in, the tokenizer registry (text <-> ids, chat templates, streaming detokenization), protobuf out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from forethought.domain import require
from forethought.rpc.errors import NotFound
from forethought.tokenize import (
    IncrementalDetokenizer,
    ModelTokenizer,
    TokenizerRegistry,
    UnknownModel,
)
from forethought.v1 import common_pb2, tokenizer_pb2, tokenizer_pb2_grpc

MAX_BATCH = 256
MAX_TEXT_CHARS = 4 * 1024 * 1024


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
        require(all(len(text) <= MAX_TEXT_CHARS for text in request.texts), "texts",
                f"each text must be at most {MAX_TEXT_CHARS} characters")
        ids = await asyncio.to_thread(tokenizer.encode_batch, list(request.texts), request.add_special_tokens)
        return tokenizer_pb2.TokenizeResponse(token_ids=[common_pb2.TokenIds(ids=row) for row in ids])

    async def Detokenize(
        self, request: tokenizer_pb2.DetokenizeRequest, context: grpc.aio.ServicerContext
    ) -> tokenizer_pb2.DetokenizeResponse:
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
        require(sum(len(message.content) for message in request.messages) <= MAX_TEXT_CHARS, "messages",
                f"must hold at most {MAX_TEXT_CHARS} characters of content in all")
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
