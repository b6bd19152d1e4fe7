"""The scheduler's ``GenerateResponse`` stream as OpenAI's completion objects and server-sent events.

A non-streamed call answers one ``text_completion`` or ``chat.completion``; a streamed one answers chunks,
each an SSE ``data:`` line, then (with ``stream_options.include_usage``) a chunk with no choices and the
usage, then ``data: [DONE]``. Every answer also carries a ``forethought`` object: the request id, the
worker that served it, the predictor's forecast and the scheduler's timings.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from forethought.v1 import common_pb2, scheduler_pb2

FINISH_REASONS = {
    common_pb2.FINISH_REASON_LENGTH: "length",
    common_pb2.FINISH_REASON_STOP: "stop",
    common_pb2.FINISH_REASON_ABORT: "abort",  # cancelled through the scheduler's Cancel
    common_pb2.FINISH_REASON_ERROR: "error",
}
DONE = b"data: [DONE]\n\n"


class Route(enum.Enum):
    """The two generating routes, by the ``object`` names of their answers and chunks."""

    COMPLETION = ("text_completion", "text_completion")
    CHAT = ("chat.completion", "chat.completion.chunk")

    @property
    def answer_object(self) -> str:
        return self.value[0]

    @property
    def chunk_object(self) -> str:
        return self.value[1]


@dataclass
class Answer:
    """What a request's stream has said so far."""

    request_id: str
    model: str
    created: int  # unix seconds, OpenAI's ``created``
    texts: list[str] = field(default_factory=list)
    finish_reason: int = common_pb2.FINISH_REASON_UNSPECIFIED
    usage: common_pb2.Usage | None = None
    worker_id: str = ""
    predicted_output_tokens: float = 0.0

    def add(self, reply: scheduler_pb2.GenerateResponse) -> None:
        self.texts.append(reply.text)
        self.worker_id = reply.worker_id or self.worker_id
        self.predicted_output_tokens = reply.predicted_output_tokens or self.predicted_output_tokens
        if reply.finish_reason:
            self.finish_reason = reply.finish_reason
        if reply.HasField("usage"):
            self.usage = reply.usage

    def forethought(self) -> dict[str, Any]:
        """Forethought's own account of the request: where it ran, the forecast and the timings."""
        usage = self.usage or common_pb2.Usage()
        return {"request_id": self.request_id, "worker_id": self.worker_id,
                "predicted_output_tokens": self.predicted_output_tokens, "ttft_s": usage.ttft_s, "queue_s": usage.queue_s}


def usage_json(usage: common_pb2.Usage | None) -> dict[str, Any]:
    usage = usage or common_pb2.Usage()
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.output_tokens,
            "total_tokens": usage.prompt_tokens + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_prompt_tokens}}


def finish_reason_json(value: int) -> str | None:
    return FINISH_REASONS.get(value)


def answer_json(route: Route, answer: Answer) -> dict[str, Any]:
    """The whole answer of a call without ``stream``."""
    text = "".join(answer.texts)
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish_reason_json(answer.finish_reason)}
    if route is Route.CHAT:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {"id": answer.request_id, "object": route.answer_object, "created": answer.created, "model": answer.model,
            "choices": [choice], "usage": usage_json(answer.usage), "forethought": answer.forethought()}


def chunk_json(route: Route, answer: Answer, reply: scheduler_pb2.GenerateResponse, first: bool,
               include_usage: bool) -> dict[str, Any]:
    """One streamed chunk for ``reply`` (the chat's first chunk also names the assistant's role)."""
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish_reason_json(reply.finish_reason)}
    if route is Route.CHAT:
        choice["delta"] = {"role": "assistant", "content": reply.text} if first else {"content": reply.text}
    else:
        choice["text"] = reply.text
    chunk = _chunk(route, answer, [choice])
    if include_usage:
        chunk["usage"] = None  # OpenAI's convention: every chunk has the key; the last one fills it
    if reply.finish_reason:
        chunk["forethought"] = answer.forethought()
    return chunk


def usage_chunk_json(route: Route, answer: Answer) -> dict[str, Any]:
    """The chunk after the last choice when the caller asked for ``stream_options.include_usage``."""
    return {**_chunk(route, answer, []), "usage": usage_json(answer.usage)}


def _chunk(route: Route, answer: Answer, choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": answer.request_id, "object": route.chunk_object, "created": answer.created, "model": answer.model,
            "choices": choices}


def sse(payload: dict[str, Any]) -> bytes:
    """One server-sent event carrying ``payload`` as JSON."""
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
