"""Protobuf at the front door: validation, prompt tokens through the tokenizer service, the engine request."""

from __future__ import annotations

import asyncio

import grpc

from forethought.domain import (
    GenerationRequest,
    require,
    validate_prompt,
    validate_terms,
)
from forethought.rpc import convert
from forethought.rpc.errors import InvalidArgument, NotFound, Unavailable, invalid_argument_of
from forethought.scheduling import DependencyHealth
from forethought.services.scheduler.dependency_reports import record_outcome
from forethought.services.scheduler.forecasts import ForecastPrompt
from forethought.telemetry.tracing import trace_metadata
from forethought.v1 import (
    common_pb2,
    scheduler_pb2,
    tokenizer_pb2,
    tokenizer_pb2_grpc,
)


def validate(request: scheduler_pb2.GenerateRequest) -> None:
    """Raises InvalidField naming the first field that breaks its rule, before any work is done.

    The prompt's forms and the application fields are the front door's own; the rest are the request rules
    of ``forethought.domain``, which the prompt's token ids meet in ``generation_of``.
    """
    require(bool(request.model), "model", "must be non-empty")
    which = request.WhichOneof("prompt")
    require(which is not None, "prompt", "one of text, token_ids or chat is required")
    if which == "text":
        require(bool(request.text), "text", "must be non-empty")
    elif which == "chat":
        require(len(request.chat.messages) > 0, "chat.messages", "must be non-empty")
    validate_terms(request.max_tokens, convert.sampling_from_proto(request.sampling), request.slo.ttft_s, request.slo.tpot_s)
    if request.service_class == common_pb2.SERVICE_CLASS_REAL_TIME:
        require(request.slo.ttft_s > 0 or request.slo.tpot_s > 0, "slo", "a real-time request needs ttft_s or tpot_s > 0")
    if request.HasField("deadline"):
        convert.seconds_of(request.deadline, "deadline")
    require(bool(request.application_id) or not request.step, "step", "needs application_id")
    if request.HasField("execution"):
        require(bool(request.step), "execution", "needs application_id and step")
        require(request.execution >= 0, "execution", f"must be >= 0 (the execution's position in the run), got {request.execution}")


def forecast_prompt(request: scheduler_pb2.GenerateRequest) -> ForecastPrompt:
    """The prompt as the predictor reads it: text (empty for token-id prompts) and, for a chat, the
    lengths of the assistant answers before its last user message."""
    which = request.WhichOneof("prompt")
    if which == "text":
        return ForecastPrompt(request.text)
    if which == "chat":
        messages = list(request.chat.messages)
        last_user = max((index for index, message in enumerate(messages) if message.role == "user"), default=len(messages))
        answers = tuple(len(message.content) for message in messages[:last_user] if message.role == "assistant")
        return ForecastPrompt("\n".join(message.content for message in messages), answers)
    return ForecastPrompt("")


def generation_of(request: scheduler_pb2.GenerateRequest, request_id: str, token_ids: list[int]) -> GenerationRequest:
    """The engine request of a front-door request ``validate`` passed, whose prompt is now ``token_ids``.

    ``validate`` checked the terms; the prompt's ids are checked here, once they are a list: reading a
    protobuf repeated field element by element costs several times a list's pass.
    """
    validate_prompt(token_ids, "token_ids.ids" if request.WhichOneof("prompt") == "token_ids" else "prompt_token_ids")
    return GenerationRequest(
        request_id=request_id, prompt_token_ids=tuple(token_ids), max_tokens=request.max_tokens,
        service_class=convert.service_class_from_proto(request.service_class),
        ttft_slo_s=request.slo.ttft_s, tpot_slo_s=request.slo.tpot_s, sampling=convert.sampling_from_proto(request.sampling),
        lora_name=request.lora_adapter, fit_max_tokens=request.fit_max_tokens,
    )


def health_of(state: str, age_s: float, ttl_s: float) -> int:
    if state == "draining":
        return scheduler_pb2.WORKER_HEALTH_DRAINING
    if age_s > ttl_s / 2:
        return scheduler_pb2.WORKER_HEALTH_UNHEALTHY
    return scheduler_pb2.WORKER_HEALTH_SERVING


TOKENIZER_RETRY_S = 1.0
"""The wait a text prompt refused while the tokenizer is down asks for (``RetryInfo``): about its restart's scale."""


class PromptTokens:
    """Token ids of a prompt: given, or from the tokenizer service (with a timeout).

    While the tokenizer is down a text or chat prompt is refused before it is accepted, with UNAVAILABLE and
    ``RetryInfo`` (the client library waits and retries); the degraded gauge and one log line mark each
    change of state. Token-id prompts are served throughout.
    """

    def __init__(self, tokenizer: tokenizer_pb2_grpc.TokenizerServiceStub | None, timeout_s: float) -> None:
        self._tokenizer = tokenizer
        self._timeout_s = timeout_s
        self.health = DependencyHealth("tokenizer", configured=True)

    async def of(self, request: scheduler_pb2.GenerateRequest) -> list[int]:
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
                    timeout=self._timeout_s, metadata=trace_metadata(),
                )
                token_ids = list(reply.token_ids)
            else:
                tokenized = await self._tokenizer.Tokenize(
                    tokenizer_pb2.TokenizeRequest(model=request.model, texts=[request.text]), timeout=self._timeout_s,
                    metadata=trace_metadata())
                token_ids = list(tokenized.token_ids[0].ids)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                raise NotFound(f"model: {error.details()}") from error
            if error.code() == grpc.StatusCode.INVALID_ARGUMENT:  # the prompt is at fault, not the tokenizer
                self._record(True)
                raise _as_prompt_field(invalid_argument_of(error)) from error
            self._record(False, f"{error.code().name}: {error.details()}")
            raise Unavailable(f"tokenizer unavailable ({error.code().name}: {error.details()}); retry in "
                              f"{TOKENIZER_RETRY_S:g} s, or send token_ids", TOKENIZER_RETRY_S) from error
        self._record(True)
        return token_ids

    def _record(self, ok: bool, error: str = "") -> None:
        record_outcome(self.health, ok, error, "tokenizer unavailable ({error}): degraded, text and chat prompts are "
                       "refused with UNAVAILABLE and RetryInfo, token-id prompts served", "tokenizer reachable again")

    async def of_text(self, model: str, text: str) -> list[int]:
        """The tokens of ``text`` as ``model`` reads it."""
        return await self.of(scheduler_pb2.GenerateRequest(model=model, text=text))

    def detokenizer(self, model: str) -> StreamDetokenizer | None:
        return StreamDetokenizer(self._tokenizer, model) if self._tokenizer is not None else None


def _as_prompt_field(refusal: InvalidArgument) -> InvalidArgument:
    """The tokenizer's refusal of a prompt, naming the front door's field (``texts`` -> ``text``,
    ``messages`` -> ``chat.messages``)."""
    if refusal.field.startswith("texts"):
        return InvalidArgument("text", refusal.rule)
    return InvalidArgument(f"chat.{refusal.field}" if refusal.field.startswith("messages") else refusal.field, refusal.rule)


class StreamDetokenizer:
    """Turns a token stream into text through one DetokenizeStream call (no split UTF-8 characters)."""

    def __init__(self, tokenizer: tokenizer_pb2_grpc.TokenizerServiceStub, model: str) -> None:
        self._call = tokenizer.DetokenizeStream(metadata=trace_metadata())
        self._model = model

    async def __call__(self, token_ids: list[int], last: bool = False) -> str:
        """The text the tokens add; with ``last``, also what the tokenizer held back (a character the
        stream ended in the middle of).

        Raises:
            Unavailable: the tokenizer failed; raised as the scheduler's own error, so the worker whose
                stream is being relayed is not taken for lost.
        """
        texts = []
        try:
            if token_ids:
                await self._call.write(tokenizer_pb2.DetokenizeStreamRequest(model=self._model, token_ids=token_ids))
                self._model = ""  # the model goes in the first message only
                reply = await self._call.read()
                texts.append(reply.text if reply is not grpc.aio.EOF else "")
            if last:
                await self._call.done_writing()
                while (reply := await self._call.read()) is not grpc.aio.EOF:
                    texts.append(reply.text)
        except (grpc.aio.AioRpcError, grpc.aio.UsageError) as error:
            raise Unavailable(f"tokenizer failed while detokenizing the stream: {error}; retry") from error
        except asyncio.InvalidStateError as error:  # the call ended between two tokens: its status says why
            raise Unavailable(f"tokenizer failed while detokenizing the stream: {(await self._call.code()).name}: "
                              f"{await self._call.details()}; retry") from error
        return "".join(texts)

    async def aclose(self) -> None:
        self._call.cancel()
