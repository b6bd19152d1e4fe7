"""The scheduler's ``GenerateResponse`` stream as OpenAI's completion objects and server-sent events.

A non-streamed call answers one ``text_completion`` or ``chat.completion``; a streamed one answers chunks,
each an SSE ``data:`` line, then (with ``stream_options.include_usage``) a chunk with no choices and the
usage, then ``data: [DONE]``. Every answer also carries a ``forethought`` object: the request id, the
worker that served it, the predictor's forecast and the scheduler's timings. A request that asked for log
probabilities gets them in its route's shape: the chat's ``logprobs.content`` entries, or the legacy
completion's parallel lists (``tokens``, ``token_logprobs``, ``top_logprobs``, ``text_offset``). A
completion with ``echo`` starts with its prompt, in the text and in the log probabilities.
"""

from __future__ import annotations

import enum
import itertools
import json
from collections.abc import Sequence
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
LOWEST_LOGPROB = -9999.0
"""Stands for a log probability of minus infinity, which JSON cannot carry (vLLM's server does the same)."""


class Route(enum.Enum):
    """The two generating routes, by the ``object`` names of their answers and chunks."""

    COMPLETION = ("text_completion", "text_completion")
    CHAT = ("chat.completion", "chat.completion.chunk")

    @property
    def answer_object(self) -> str:
        return self.value[0]

    @property
    def prompt_param(self) -> str:
        """The request parameter holding the prompt, which a refusal of the prompt names."""
        return "messages" if self is Route.CHAT else "prompt"

    @property
    def chunk_object(self) -> str:
        return self.value[1]


@dataclass(frozen=True)
class Said:
    """What one reply adds to the answer: its text and its tokens' log probabilities (the prompt's first, when
    the reply is the first of an echoing completion); ``text_offset``: where its first token starts."""

    text: str
    logprobs: list[common_pb2.PositionLogprobs]
    text_offset: int = 0


@dataclass
class Answer:
    """What one choice's stream has said so far. ``request_id``: the call's (OpenAI's ``id``); ``call_id``: the
    scheduler request of this choice (the call's id when it has one choice). ``echo``: the answer starts with
    the prompt, ``prompt_text`` when it was sent as text, else the text of its tokens (from their scores)."""

    request_id: str
    model: str
    created: int  # unix seconds, OpenAI's ``created``
    index: int = 0
    call_id: str = ""
    texts: list[str] = field(default_factory=list)
    finish_reason: int = common_pb2.FINISH_REASON_UNSPECIFIED
    usage: common_pb2.Usage | None = None
    worker_id: str = ""
    predicted_output_tokens: float = 0.0
    echo: bool = False
    prompt_text: str = ""
    logprobs: list[common_pb2.PositionLogprobs] = field(default_factory=list)
    token_chars: int = 0  # characters of the tokens' own texts so far: where the next one starts (``text_offset``)

    def add(self, reply: scheduler_pb2.GenerateResponse) -> Said:
        prompt = list(reply.prompt_logprobs) if self.echo else []
        echoed = self.prompt_text if self.echo and not self.texts else ""
        if prompt and not self.prompt_text:
            echoed = "".join(position.chosen.token for position in prompt)
        said = Said(echoed + reply.text, prompt + list(reply.logprobs), self.token_chars)
        self.texts.append(said.text)
        self.logprobs.extend(said.logprobs)
        self.token_chars += sum(len(position.chosen.token) for position in said.logprobs)
        self.worker_id = reply.worker_id or self.worker_id
        self.predicted_output_tokens = reply.predicted_output_tokens or self.predicted_output_tokens
        if reply.finish_reason:
            self.finish_reason = reply.finish_reason
        if reply.HasField("usage"):
            self.usage = reply.usage
        return said

    def forethought(self) -> dict[str, Any]:
        """Forethought's own account of the request: where it ran, the forecast and the timings."""
        usage = self.usage or common_pb2.Usage()
        return {"request_id": self.call_id or self.request_id, "worker_id": self.worker_id,
                "predicted_output_tokens": self.predicted_output_tokens, "ttft_s": usage.ttft_s, "queue_s": usage.queue_s}


def usage_json(answers: Sequence[Answer]) -> dict[str, Any]:
    """The call's usage: its prompt once (every choice has the same), the tokens of every choice."""
    prompt = next((answer.usage for answer in answers if answer.usage is not None), common_pb2.Usage())
    completion = sum(answer.usage.output_tokens for answer in answers if answer.usage is not None)
    return {"prompt_tokens": prompt.prompt_tokens, "completion_tokens": completion,
            "total_tokens": prompt.prompt_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": prompt.cached_prompt_tokens}}


def finish_reason_json(value: int) -> str | None:
    return FINISH_REASONS.get(value)


def logprobs_json(route: Route, positions: Sequence[common_pb2.PositionLogprobs], wanted: bool,
                  text_offset: int = 0) -> dict[str, Any] | None:
    """A choice's ``logprobs``: None when the request did not ask; ``text_offset``: where the first token starts."""
    if not wanted:
        return None
    if route is Route.CHAT:
        return {"content": [{**_token_json(position.chosen), "top_logprobs": [_token_json(each) for each in position.top]}
                            for position in positions]}
    offsets = list(itertools.accumulate((len(position.chosen.token) for position in positions), initial=text_offset))
    return {"tokens": [position.chosen.token for position in positions],
            "token_logprobs": [_logprob(position.chosen) for position in positions],
            "top_logprobs": [{each.token: _logprob(each) for each in position.top}
                             if position.chosen.HasField("logprob") else None for position in positions],
            "text_offset": offsets[:-1]}


def _token_json(token: common_pb2.TokenLogprob) -> dict[str, Any]:
    return {"token": token.token, "logprob": _logprob(token), "bytes": list(token.token.encode())}


def _logprob(token: common_pb2.TokenLogprob) -> float | None:
    """None for a token nothing predicts (the prompt's first)."""
    return max(token.logprob, LOWEST_LOGPROB) if token.HasField("logprob") else None


def answer_json(route: Route, answers: Sequence[Answer], logprobs: bool = False) -> dict[str, Any]:
    """The whole answer of a call without ``stream``, one choice per answer; ``logprobs``: the request asked for
    them. Forethought's account is the first choice's, with every choice's beside it when there are more."""
    first = answers[0]
    account = first.forethought()
    if len(answers) > 1:
        account["choices"] = [answer.forethought() for answer in answers]
    return {"id": first.request_id, "object": route.answer_object, "created": first.created, "model": first.model,
            "choices": [_choice_json(route, answer, logprobs) for answer in answers], "usage": usage_json(answers),
            "forethought": account}


def _choice_json(route: Route, answer: Answer, logprobs: bool) -> dict[str, Any]:
    text = "".join(answer.texts)
    choice: dict[str, Any] = {"index": answer.index, "logprobs": logprobs_json(route, answer.logprobs, logprobs),
                              "finish_reason": finish_reason_json(answer.finish_reason)}
    if route is Route.CHAT:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return choice


def chunk_json(route: Route, answer: Answer, reply: scheduler_pb2.GenerateResponse, said: Said, first: bool,
               include_usage: bool, logprobs: bool = False) -> dict[str, Any]:
    """One streamed chunk for ``reply``, which ``answer.add`` took and answered with ``said`` (the chat's first
    chunk also names the assistant's role)."""
    choice: dict[str, Any] = {"index": answer.index, "logprobs": logprobs_json(route, said.logprobs, logprobs, said.text_offset),
                              "finish_reason": finish_reason_json(reply.finish_reason)}
    if route is Route.CHAT:
        choice["delta"] = {"role": "assistant", "content": said.text} if first else {"content": said.text}
    else:
        choice["text"] = said.text
    chunk = _chunk(route, answer, [choice])
    if include_usage:
        chunk["usage"] = None  # OpenAI's convention: every chunk has the key; the last one fills it
    if reply.finish_reason:
        chunk["forethought"] = answer.forethought()
    return chunk


def usage_chunk_json(route: Route, answers: Sequence[Answer]) -> dict[str, Any]:
    """The chunk after the last choices' when the caller asked for ``stream_options.include_usage``."""
    return {**_chunk(route, answers[0], []), "usage": usage_json(answers)}


def _chunk(route: Route, answer: Answer, choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": answer.request_id, "object": route.chunk_object, "created": answer.created, "model": answer.model,
            "choices": choices}


def sse(payload: dict[str, Any]) -> bytes:
    """One server-sent event carrying ``payload`` as JSON."""
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
