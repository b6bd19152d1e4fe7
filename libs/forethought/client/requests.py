"""The scheduler's ``GenerateRequest`` from typed arguments: a prompt as text, token ids or a chat, the
length, sampling, and Forethought's fields (service class and objectives, deadline, application step)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from google.protobuf import timestamp_pb2

from forethought.domain import InvalidField, SamplingParams, ServiceClass, require
from forethought.rpc import convert
from forethought.v1 import scheduler_pb2


@dataclass(frozen=True)
class ServiceLevelObjective:
    """A real-time request's objectives, in seconds; 0 means none."""

    ttft_s: float = 0.0
    tpot_s: float = 0.0


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system", "user" or "assistant"
    content: str


Chat = Sequence[ChatMessage | tuple[str, str]]
"""Chat messages, as ``ChatMessage`` or ``(role, content)`` pairs."""


def generate_request(*, model: str, max_tokens: int, prompt: str | None = None, token_ids: Sequence[int] | None = None,
                     chat: Chat | None = None, sampling: SamplingParams | None = None,
                     service_class: ServiceClass | None = None, slo: ServiceLevelObjective | None = None,
                     deadline: datetime | float | None = None, application_id: str = "", step: str = "",
                     execution: int | None = None, request_id: str = "", return_text: bool = True,
                     fit_max_tokens: bool = False) -> scheduler_pb2.GenerateRequest:
    """The request; exactly one of ``prompt``, ``token_ids`` and ``chat``; ``deadline``: an aware datetime
    or unix seconds; ``fit_max_tokens``: the worker lowers ``max_tokens`` to the context the prompt leaves
    rather than refuse it. The scheduler checks the rest of the rules and names the field it refuses."""
    given = [name for name, value in (("prompt", prompt), ("token_ids", token_ids), ("chat", chat)) if value is not None]
    require(len(given) == 1, "prompt", f"give exactly one of prompt, token_ids or chat (got {', '.join(given) or 'none'})")
    require(isinstance(model, str), "model", "must be a str")
    require(_is_int(max_tokens), "max_tokens", "must be an int")
    require(prompt is None or isinstance(prompt, str), "prompt", "must be a str (token ids go in token_ids, a chat in chat)")
    if token_ids is not None:
        require(not isinstance(token_ids, str | bytes), "token_ids", "must be a sequence of int token ids")
        token_ids = list(token_ids)
        require(all(_is_int(token) and INT32_MIN <= token <= INT32_MAX for token in token_ids),
                "token_ids", "must be a sequence of int token ids")
    if chat is not None:
        require(not isinstance(chat, str | bytes), "chat", "must be a sequence of ChatMessage or (role, content) pairs of str")
        chat = list(chat)
        require(all(_is_message(message) for message in chat),
                "chat", "must be a sequence of ChatMessage or (role, content) pairs of str")
    request = scheduler_pb2.GenerateRequest(
        request_id=request_id, model=model, max_tokens=max_tokens, return_text=return_text,
        application_id=application_id, step=step, execution=execution, fit_max_tokens=fit_max_tokens,
    )
    if prompt is not None:
        request.text = prompt
    elif token_ids is not None:
        request.token_ids.ids.extend(token_ids)
    else:
        for message in chat or ():
            role, content = (message.role, message.content) if isinstance(message, ChatMessage) else message
            request.chat.messages.add(role=role, content=content)
    if sampling is not None:
        request.sampling.CopyFrom(convert.sampling_to_proto(sampling))
    if service_class is not None:
        request.service_class = convert.service_class_to_proto(service_class)
    if slo is not None:
        request.slo.ttft_s, request.slo.tpot_s = slo.ttft_s, slo.tpot_s
    if deadline is not None:
        request.deadline.CopyFrom(deadline_timestamp(deadline))
    return request


INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
"""What the contract's token id field holds; the scheduler refuses ids outside the model's vocabulary."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_message(message: object) -> bool:
    if isinstance(message, ChatMessage):
        return isinstance(message.role, str) and isinstance(message.content, str)
    return isinstance(message, tuple) and len(message) == 2 and all(isinstance(part, str) for part in message)


def deadline_timestamp(deadline: datetime | float) -> timestamp_pb2.Timestamp:
    """A deadline, an aware datetime or unix seconds, as the contract's timestamp; InvalidField naming ``deadline``
    for a naive datetime or a time no timestamp holds."""
    if isinstance(deadline, datetime):
        if deadline.tzinfo is None:
            raise InvalidField("deadline", "a datetime needs its time zone")
        return convert.timestamp_of(deadline.timestamp(), "deadline")
    return convert.timestamp_of(float(deadline), "deadline")
