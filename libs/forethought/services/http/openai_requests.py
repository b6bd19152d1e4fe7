"""OpenAI request bodies (and Forethought's headers) as the scheduler's ``GenerateRequest``.

``/v1/completions`` and ``/v1/chat/completions`` take OpenAI's fields; Forethought's own travel as extra
body fields or as ``X-Forethought-*`` headers, a body field winning over its header. A field of the wrong
type or a feature the mesh does not offer raises ``InvalidField`` naming the OpenAI parameter; the rules the
scheduler keeps (ranges, the model, the prompt's length) are left to the scheduler, which names the field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from google.protobuf import timestamp_pb2

from forethought.domain import MAX_LOGPROBS, MAX_TOKENS_LIMIT, InvalidField, StructuredOutput, require
from forethought.rpc import convert
from forethought.v1 import common_pb2, scheduler_pb2

SERVICE_CLASSES = {"rt": common_pb2.SERVICE_CLASS_REAL_TIME, "be": common_pb2.SERVICE_CLASS_BEST_EFFORT}
CHAT_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
"""OpenAI's roles as the chat template names them (a ``developer`` message is a system message)."""
INT32_MAX = (1 << 31) - 1

HEADERS = {
    "service_class": "x-forethought-service-class",
    "application_id": "x-forethought-application-id",
    "step": "x-forethought-step",
    "execution": "x-forethought-execution",
    "deadline": "x-forethought-deadline",
    "slo.ttft_s": "x-forethought-slo-ttft-s",
    "slo.tpot_s": "x-forethought-slo-tpot-s",
}
"""Forethought's fields and the headers that carry them (header names are case-insensitive)."""

MAX_CHOICES = 16
"""The most choices (``n``) one call may ask for: each is a request of its own through the scheduler."""

UNSUPPORTED: dict[str, tuple[Any, ...]] = {
    "suffix": (None, ""),
    "best_of": (None, 1), "logit_bias": (None, {}), "tools": (None, []), "functions": (None, []),
}
"""OpenAI features the mesh does not offer, with the values that ask for nothing (accepted as sent)."""


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def require_unicode_text(value: object, field: str = "") -> None:
    """JSON's ``\\u`` escapes can spell half of a UTF-16 pair alone (``"\\ud800"``), which no UTF-8 text holds
    and no protobuf string takes: ``InvalidField`` names the first string of the body (or key) with one."""
    if isinstance(value, str):
        found = LONE_SURROGATE.search(value)
        if found is not None:
            raise InvalidField(field or "body", f"must be Unicode text: it holds a lone surrogate (\\u{ord(found[0]):04x}) "
                                                f"at character {found.start()}")
    elif isinstance(value, dict):
        for key, item in value.items():
            require_unicode_text(key, f"{field} (a key)" if field else "body (a key)")
            require_unicode_text(item, f"{field}.{key}" if field else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            require_unicode_text(item, f"{field}[{index}]")


@dataclass(frozen=True)
class GatewayRequest:
    """One OpenAI call as the scheduler takes it, and how to answer it."""

    generate: scheduler_pb2.GenerateRequest
    stream: bool
    include_usage: bool  # stream_options.include_usage: a last chunk with the usage
    echo: bool = False  # completions' echo: the answer starts with the prompt
    n: int = 1  # choices: one scheduler request each

    def choice_requests(self) -> list[scheduler_pb2.GenerateRequest]:
        """One request per choice: ``generate`` itself for one; for more, copies whose ids end in ``-<index>``
        and whose seed, when set, differs by choice (so seeded choices differ, and each is reproducible)."""
        if self.n == 1:
            return [self.generate]
        choices = []
        for index in range(self.n):
            choice = scheduler_pb2.GenerateRequest()
            choice.CopyFrom(self.generate)
            choice.request_id = f"{self.generate.request_id}-{index}"
            if choice.sampling.HasField("seed"):
                choice.sampling.seed ^= index  # stays within int64, unlike an addition
            choices.append(choice)
        return choices


def completion_request(body: Mapping[str, Any], headers: Mapping[str, str], request_id: str,
                       default_max_tokens: int) -> GatewayRequest:
    """The ``/v1/completions`` body: ``prompt`` is a string or token ids (or a list holding one of them)."""
    request = _common(body, headers, request_id, ("max_tokens",), default_max_tokens)
    require(body.get("top_logprobs") in (None, 0), "top_logprobs", "is a chat field; completions take logprobs: N")
    _ask_logprobs(request, _integer(body, "logprobs"), "logprobs")
    echo = _typed(body, "echo", bool, "a boolean") or False
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        require(bool(prompt), "prompt", "must be non-empty")
        request.text = prompt
    elif isinstance(prompt, list) and prompt and _token_ids(prompt):
        request.token_ids.ids.extend(prompt)
    else:
        raise InvalidField("prompt", "must be a non-empty string or a list of token ids (one prompt per request)")
    if echo and (request.sampling.HasField("logprobs") or request.WhichOneof("prompt") == "token_ids"):
        # The prompt's tokens and their scores come from the engine; a text prompt alone is echoed as sent.
        request.sampling.prompt_logprobs = request.sampling.logprobs
    return _gateway_request(body, request, echo)


def chat_request(body: Mapping[str, Any], headers: Mapping[str, str], request_id: str,
                 default_max_tokens: int) -> GatewayRequest:
    """The ``/v1/chat/completions`` body: ``messages`` of system, developer, user and assistant turns."""
    request = _common(body, headers, request_id, ("max_completion_tokens", "max_tokens"), default_max_tokens)
    require(body.get("echo") in (None, False), "echo", "is a completions field")
    wanted = _typed(body, "logprobs", bool, "a boolean") or False
    top = _integer(body, "top_logprobs")
    require(top in (None, 0) or wanted, "top_logprobs", "needs logprobs: true")
    _ask_logprobs(request, (top or 0) if wanted else None, "top_logprobs")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidField("messages", "must be a non-empty list")
    for index, message in enumerate(messages):
        field = f"messages[{index}]"
        require(isinstance(message, dict), field, "must be an object with role and content")
        role = message.get("role")
        require(role in CHAT_ROLES, f"{field}.role", f"must be one of {', '.join(CHAT_ROLES)}")
        request.chat.messages.add(role=CHAT_ROLES[role], content=_content(message.get("content"), f"{field}.content"))
    return _gateway_request(body, request)


def _ask_logprobs(request: scheduler_pb2.GenerateRequest, alternatives: int | None, field: str) -> None:
    """Asks for each token's log probability and ``alternatives`` likeliest others (None: nothing asked)."""
    if alternatives is not None:
        require(0 <= alternatives <= MAX_LOGPROBS, field, f"must be in 0..{MAX_LOGPROBS}")
        request.sampling.logprobs = alternatives


def _content(content: Any, field: str) -> str:
    """A message's text: a string, or text parts (``[{"type": "text", "text": ...}]``) joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, dict) and part.get("type") == "text"
                                         and isinstance(part.get("text"), str) for part in content):
        return "".join(part["text"] for part in content)
    raise InvalidField(field, "must be a string or a list of text parts")


def _gateway_request(body: Mapping[str, Any], request: scheduler_pb2.GenerateRequest, echo: bool = False) -> GatewayRequest:
    stream = _typed(body, "stream", bool, "a boolean") or False
    options = _typed(body, "stream_options", dict, "an object") or {}
    include_usage = options.get("include_usage", False)
    require(isinstance(include_usage, bool), "stream_options.include_usage", "must be a boolean")
    require(stream or not options, "stream_options", "is only allowed with stream: true")
    n = _integer(body, "n")
    require(n is None or 1 <= n <= MAX_CHOICES, "n", f"must be in 1..{MAX_CHOICES}")
    return GatewayRequest(request, stream, include_usage, echo, n or 1)


def _common(body: Mapping[str, Any], headers: Mapping[str, str], request_id: str,
            length_fields: tuple[str, ...], default_max_tokens: int) -> scheduler_pb2.GenerateRequest:
    """What both routes share: model, length (the first of ``length_fields`` sent, else the default, which a
    worker lowers to what its engine fits, as OpenAI fills the context that is left), sampling and Forethought's
    fields."""
    require(isinstance(body, Mapping), "body", "must be a JSON object")
    model = body.get("model")
    require(isinstance(model, str) and bool(model), "model", "must be a non-empty string")
    for name, harmless in UNSUPPORTED.items():
        require(body.get(name) in harmless, name, "is not supported by Forethought")
    request = scheduler_pb2.GenerateRequest(request_id=request_id, model=model, return_text=True,
                                            sampling=_sampling(body))
    length_field, max_tokens = next(((name, value) for name in length_fields if (value := _integer(body, name)) is not None),
                                    (None, default_max_tokens))
    require(1 <= max_tokens <= MAX_TOKENS_LIMIT, length_field or length_fields[0], f"must be in 1..{MAX_TOKENS_LIMIT}")
    request.max_tokens = max_tokens
    request.fit_max_tokens = length_field is None
    _forethought_fields(request, _extras(body, headers))
    return request


def _sampling(body: Mapping[str, Any]) -> common_pb2.SamplingParams:
    sampling = common_pb2.SamplingParams()
    for name in ("temperature", "top_p", "presence_penalty", "frequency_penalty", "repetition_penalty"):
        value = _number(body, name)
        if value is not None:
            setattr(sampling, name, value)
    seed = _integer(body, "seed")
    if seed is not None:
        sampling.seed = seed
    top_k = _integer(body, "top_k") or 0
    require(-1 <= top_k <= INT32_MAX, "top_k", "must be -1 or 0 (off) or a count of tokens")
    sampling.top_k = max(0, top_k)  # vLLM's extra field; its -1 is this contract's 0
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    require(stop is None or isinstance(stop, list) and all(isinstance(item, str) for item in stop),
            "stop", "must be a string or a list of strings")
    sampling.stop.extend(stop or ())
    stop_token_ids = body.get("stop_token_ids") or []
    require(isinstance(stop_token_ids, list) and _token_ids(stop_token_ids), "stop_token_ids", "must be a list of token ids")
    sampling.stop_token_ids.extend(stop_token_ids)
    sampling.ignore_eos = _typed(body, "ignore_eos", bool, "a boolean") or False
    form = _structured_output(body)
    if form is not None:
        sampling.structured_output.CopyFrom(convert.structured_output_to_proto(form))
    return sampling


def _structured_output(body: Mapping[str, Any]) -> StructuredOutput | None:
    """OpenAI's ``response_format`` (``json_object``, or ``json_schema`` with its ``schema``), or vLLM's extra
    ``structured_outputs`` (one of ``json``, ``regex``, ``choice``, ``grammar``); the scheduler checks the rest."""
    response_format = _typed(body, "response_format", dict, "an object with a type") or {"type": "text"}
    kind = response_format.get("type")
    require(kind in ("text", "json_object", "json_schema"), "response_format.type", "must be text, json_object or json_schema")
    extra = _typed(body, "structured_outputs", dict, "an object with one of json, regex, choice, grammar")
    if extra is not None:
        require(kind == "text", "structured_outputs", "cannot go with a response_format other than text")
        schema, regex, choice, grammar = (extra.get(name) for name in ("json", "regex", "choice", "grammar"))
        require(schema is None or isinstance(schema, dict | str), "structured_outputs.json", "must be a JSON Schema")
        require(all(value is None or isinstance(value, str) for value in (regex, grammar)), "structured_outputs",
                "regex and grammar must be strings")
        require(choice is None or isinstance(choice, list) and all(isinstance(item, str) for item in choice),
                "structured_outputs.choice", "must be a list of strings")
        return StructuredOutput(json_schema=json.dumps(schema) if isinstance(schema, dict) else schema or "",
                                regex=regex or "", choice=tuple(choice or ()), grammar=grammar or "")
    if kind == "json_object":
        return StructuredOutput(json_object=True)
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        require(isinstance(spec, dict) and isinstance(spec.get("schema"), dict), "response_format.json_schema",
                "must be an object holding the JSON Schema as schema")
        return StructuredOutput(json_schema=json.dumps(spec["schema"]))
    return None


def _extras(body: Mapping[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    """Forethought's fields from the body, else from their headers (as text)."""
    values: dict[str, Any] = {name: headers[header] for name, header in HEADERS.items() if header in headers}
    slo = _typed(body, "slo", dict, "an object with ttft_s and tpot_s") or {}
    for name in ("ttft_s", "tpot_s"):
        if name in slo:
            values[f"slo.{name}"] = slo[name]
    values.update((name, body[name]) for name in ("service_class", "application_id", "step", "execution", "deadline")
                  if name in body)
    return values


def _forethought_fields(request: scheduler_pb2.GenerateRequest, values: Mapping[str, Any]) -> None:
    if "service_class" in values:
        service_class = values["service_class"]
        require(isinstance(service_class, str) and service_class in SERVICE_CLASSES, "service_class", "must be rt or be")
        request.service_class = SERVICE_CLASSES[service_class]
    for name in ("application_id", "step"):
        if name in values:
            require(isinstance(values[name], str), name, "must be a string")
            setattr(request, name, values[name])
    if "execution" in values:
        request.execution = _execution(values["execution"])
    for name in ("ttft_s", "tpot_s"):
        if f"slo.{name}" in values:
            setattr(request.slo, name, _seconds(values[f"slo.{name}"], f"slo.{name}"))
    if "deadline" in values:
        request.deadline.CopyFrom(deadline_of(values["deadline"]))


def _execution(value: Any) -> int:
    """A step execution's position in its run: a whole number, or its text (from a header)."""
    try:
        position = int(value) if not isinstance(value, (bool, float)) else -1
    except (TypeError, ValueError):
        position = -1
    require(0 <= position <= INT32_MAX, "execution",
            f"must be a whole number from 0 to {INT32_MAX} (the step execution's position in the run)")
    return position


def deadline_of(value: Any) -> timestamp_pb2.Timestamp:
    """A deadline as unix seconds (a number, or its text) or an RFC 3339 time with its offset."""
    try:
        seconds = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        seconds = _rfc3339(value)
    require(math.isfinite(seconds) and seconds > 0, "deadline", "must be unix seconds or an RFC 3339 time with its offset")
    return convert.timestamp_of(seconds, "deadline")


def _rfc3339(value: Any) -> float:
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return math.nan
    return moment.timestamp() if moment.tzinfo is not None else math.nan


def _seconds(value: Any, field: str) -> float:
    try:
        seconds = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        seconds = math.nan
    require(math.isfinite(seconds) and seconds >= 0, field, "must be a number of seconds >= 0")
    return seconds


def _token_ids(values: list[Any]) -> bool:
    """Whether every value is a token id the contract can carry (an int32 >= 0)."""
    return all(isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT32_MAX for value in values)


def _typed(body: Mapping[str, Any], name: str, kind: type, what: str) -> Any:
    value = body.get(name)
    require(value is None or isinstance(value, kind), name, f"must be {what}")
    return value


def _number(body: Mapping[str, Any], name: str) -> float | None:
    value = body.get(name)
    require(value is None or isinstance(value, int | float) and not isinstance(value, bool), name, "must be a number")
    return None if value is None else float(value)


def _integer(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    require(value is None or isinstance(value, int) and not isinstance(value, bool), name, "must be an integer")
    require(value is None or -(1 << 63) <= value < 1 << 63, name, "must fit in 64 bits")
    return value
