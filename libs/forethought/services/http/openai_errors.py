"""gRPC statuses as OpenAI error objects and HTTP status codes.

Every failure answers ``{"error": {"message", "type", "param", "code"}}``: ``code`` is the gRPC status's
name in lower case, ``param`` the OpenAI parameter a refused field stands for (the scheduler names its own
fields, ``sampling.stop`` is OpenAI's ``stop``), and a full queue's retry delay (``RetryInfo``) becomes
``Retry-After`` (whole seconds, rounded up) and ``retry-after-ms``, both of which OpenAI's clients honour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import grpc

from forethought.rpc.errors import invalid_argument_of, retry_delay_of

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: (400, "invalid_request_error"),
    grpc.StatusCode.UNAUTHENTICATED: (401, "authentication_error"),
    grpc.StatusCode.PERMISSION_DENIED: (403, "permission_error"),
    grpc.StatusCode.NOT_FOUND: (404, "not_found_error"),
    grpc.StatusCode.RESOURCE_EXHAUSTED: (429, "rate_limit_error"),
    grpc.StatusCode.UNAVAILABLE: (503, "service_unavailable_error"),
    grpc.StatusCode.DEADLINE_EXCEEDED: (504, "timeout_error"),
}
"""gRPC code -> (HTTP status, OpenAI error type); any other code is 500, ``server_error``."""

PROMPT_FIELDS = ("text", "token_ids.ids", "prompt_token_ids")
"""The scheduler's fields that hold the prompt as the route sent it: ``prompt`` of a completion, ``messages`` of a chat."""

PARAMS = {
    "chat.messages": "messages",
    "sampling.temperature": "temperature", "sampling.top_p": "top_p", "sampling.top_k": "top_k",
    "sampling.seed": "seed", "sampling.stop": "stop", "sampling.stop_token_ids": "stop_token_ids",
    "sampling.presence_penalty": "presence_penalty", "sampling.frequency_penalty": "frequency_penalty",
    "sampling.repetition_penalty": "repetition_penalty", "sampling.logprobs": "logprobs",
    "sampling.prompt_logprobs": "echo", "sampling.structured_output": "response_format",
    "sampling.structured_output.json_schema": "response_format", "sampling.structured_output.choice": "response_format",
}
"""The scheduler's field names whose OpenAI parameter has another name; the rest are the same."""


@dataclass(frozen=True)
class HttpError:
    """An error answer: its status, the OpenAI error object and extra headers."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def error_json(message: str, kind: str, param: str | None, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def http_error(code: grpc.StatusCode, message: str, field: str | None = None, retry_after_s: float | None = None,
               prompt_param: str = "prompt") -> HttpError:
    """The answer to a call that failed with ``code``; ``field``: the refused field, as the scheduler names it;
    ``prompt_param``: the route's parameter holding the prompt."""
    status, kind = HTTP_STATUS.get(code, (500, "server_error"))
    param = prompt_param if field in PROMPT_FIELDS else PARAMS.get(field, field) if field else None
    headers = {}
    if retry_after_s is not None:
        headers = {"Retry-After": str(max(1, math.ceil(retry_after_s))), "retry-after-ms": str(round(retry_after_s * 1000))}
    return HttpError(status, error_json(message, kind, param, code.name.lower()), headers)


def http_error_of(error: grpc.aio.AioRpcError, prompt_param: str = "prompt") -> HttpError:
    """The answer to a failed scheduler call, with the field and retry delay its status details carry."""
    code = error.code()
    field = invalid_argument_of(error).field if code == grpc.StatusCode.INVALID_ARGUMENT else None
    return http_error(code, error.details() or code.name, field, retry_delay_of(error), prompt_param)
