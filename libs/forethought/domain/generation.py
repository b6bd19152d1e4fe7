"""One generation as every layer names it: its class, sampling, the request an engine runs, and its output.

The service classes are BROS's (section 3): real-time requests with TTFT/TPOT SLOs, and best-effort work.
The rules a request must keep live here once (``validate_generation`` and its parts); every service shell
and the engine apply them, and a broken rule is an ``InvalidField`` naming the field, which the gRPC shells
return as INVALID_ARGUMENT.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

MAX_PROMPT_TOKENS = 1 << 20
MAX_TOKENS_LIMIT = 1 << 16


class ServiceClass(enum.IntEnum):
    """Request class (BROS section 3): real-time with SLOs, or best-effort throughput work."""

    RT = 1
    BE = 2


@dataclass(frozen=True)
class StructuredOutput:
    """The form an answer must take (vLLM's structured outputs): exactly one kind is set. ``json_schema``:
    a JSON Schema as JSON text; ``choice``: the strings the answer is one of; ``grammar``: EBNF."""

    json_schema: str = ""
    json_object: bool = False
    regex: str = ""
    choice: tuple[str, ...] = ()
    grammar: str = ""


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logprobs: int | None = None  # None: no log probabilities; n: each token's and its n likeliest alternatives'
    prompt_logprobs: int | None = None  # the same for every prompt token
    structured_output: StructuredOutput | None = None  # None: free text


@dataclass(frozen=True)
class GenerationRequest:
    """One request as an engine sees it.

    ``priority``: lower runs first (vLLM's convention); the scheduler maps class and rank onto it.
    ``ttft_slo_s`` / ``tpot_slo_s``: RT deadlines; 0 means none.
    ``fit_max_tokens``: ``max_tokens`` is a ceiling the worker lowers to what its engine fits.
    """

    request_id: str
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    service_class: ServiceClass = ServiceClass.BE
    priority: int = 0
    ttft_slo_s: float = 0.0
    tpot_slo_s: float = 0.0
    sampling: SamplingParams = field(default_factory=SamplingParams)
    lora_name: str = ""
    fit_max_tokens: bool = False


class FinishReason(enum.IntEnum):
    LENGTH = 1
    STOP = 2
    ABORT = 3
    ERROR = 4


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    cached_prompt_tokens: int
    output_tokens: int
    ttft_s: float


@dataclass(frozen=True)
class TokenLogprob:
    """A token's log probability at one position, and its text as the engine decodes it alone."""

    token_id: int
    logprob: float | None  # None for the prompt's first token, which nothing predicts
    token: str = ""


@dataclass(frozen=True)
class PositionLogprobs:
    """One token's log probability (generated or of the prompt) and the likeliest alternatives at its position
    (likeliest first)."""

    chosen: TokenLogprob
    top: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class GenerationChunk:
    """Tokens produced since the previous chunk; the last chunk carries ``finish_reason`` and ``usage``.

    ``text`` comes from an engine that detokenizes (``EngineBackend.detokenizes``); it need not be the
    text of this chunk's tokens (vLLM holds text back while a stop string may match). ``logprobs``: one
    entry per token of ``token_ids`` when the request asked for them (``SamplingParams.logprobs``);
    ``prompt_logprobs``: one entry per prompt token, on the first chunk (``SamplingParams.prompt_logprobs``).
    """

    request_id: str
    token_ids: tuple[int, ...]
    text: str = ""
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    logprobs: tuple[PositionLogprobs, ...] = ()
    prompt_logprobs: tuple[PositionLogprobs, ...] = ()


class InvalidField(ValueError):
    """A request field breaks a rule; the message is ``<field>: <rule>``."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


def require(condition: bool, field: str, rule: str) -> None:
    """Raises InvalidField(field, rule) unless ``condition`` holds."""
    if not condition:
        raise InvalidField(field, rule)


def validate_prompt(token_ids: Sequence[int], field: str = "prompt_token_ids") -> None:
    """A prompt holds 1..MAX_PROMPT_TOKENS token ids, none negative."""
    require(0 < len(token_ids) <= MAX_PROMPT_TOKENS, field, f"must hold 1..{MAX_PROMPT_TOKENS} ids")
    require(min(token_ids) >= 0, field, "must be >= 0")


MAX_TEMPERATURE = 2.0
"""OpenAI's and vLLM's upper bound: past it sampling is close to uniform over the vocabulary."""
MAX_PENALTY = 2.0
"""OpenAI's and vLLM's bound on the presence and frequency penalties, either sign."""
MAX_LOGPROBS = 20
"""The most alternatives a token's log probabilities may list: OpenAI's ``top_logprobs`` bound, vLLM's default."""


def validate_sampling(params: SamplingParams, field: str = "sampling") -> None:
    require(params.temperature >= 0, f"{field}.temperature", "must be >= 0")
    require(params.temperature <= MAX_TEMPERATURE, f"{field}.temperature", f"must be at most {MAX_TEMPERATURE:g}")
    require(0 < params.top_p <= 1, f"{field}.top_p", "must be in (0, 1]")
    require(params.top_k >= 0, f"{field}.top_k", "must be >= 0")
    require(all(params.stop), f"{field}.stop", "must not hold an empty string (it would stop at once)")
    require(all(token_id >= 0 for token_id in params.stop_token_ids), f"{field}.stop_token_ids", "must be >= 0")
    for name in ("presence_penalty", "frequency_penalty"):
        value = getattr(params, name)
        require(-MAX_PENALTY <= value <= MAX_PENALTY, f"{field}.{name}", f"must be in [-{MAX_PENALTY:g}, {MAX_PENALTY:g}]")
    require(0 < params.repetition_penalty < math.inf, f"{field}.repetition_penalty", "must be > 0 and finite")
    for name in ("logprobs", "prompt_logprobs"):
        value = getattr(params, name)
        require(value is None or 0 <= value <= MAX_LOGPROBS, f"{field}.{name}",
                f"must be in 0..{MAX_LOGPROBS} (alternatives listed per token)")
    if params.structured_output is not None:
        validate_structured_output(params.structured_output, f"{field}.structured_output")


def validate_structured_output(form: StructuredOutput, field: str) -> None:
    """Exactly one kind; a JSON Schema that is a JSON object; choices that are non-empty strings."""
    kinds = [name for name, value in (("json_schema", form.json_schema), ("json_object", form.json_object),
                                      ("regex", form.regex), ("choice", form.choice), ("grammar", form.grammar)) if value]
    require(len(kinds) == 1, field, f"must set exactly one of json_schema, json_object, regex, choice, grammar "
                                    f"(set: {', '.join(kinds) or 'none'})")
    if form.json_schema:
        try:
            schema = json.loads(form.json_schema)
        except json.JSONDecodeError as error:
            raise InvalidField(f"{field}.json_schema", f"must be JSON text: {error}") from None
        require(isinstance(schema, dict), f"{field}.json_schema", "must be a JSON object (a JSON Schema)")
    require(all(form.choice), f"{field}.choice", "must not hold an empty string")


def validate_terms(max_tokens: int, sampling: SamplingParams, ttft_slo_s: float, tpot_slo_s: float) -> None:
    """What a request asks of its output: a length in 1..MAX_TOKENS_LIMIT, sampling in range, SLOs >= 0."""
    require(1 <= max_tokens <= MAX_TOKENS_LIMIT, "max_tokens", f"must be in 1..{MAX_TOKENS_LIMIT}")
    validate_sampling(sampling)
    require(ttft_slo_s >= 0 and tpot_slo_s >= 0, "slo", "objectives must be >= 0")


def validate_generation(request: GenerationRequest) -> GenerationRequest:
    """The request, when it keeps every rule; raises InvalidField naming the first field that breaks one."""
    require(bool(request.request_id), "request_id", "must be non-empty")
    validate_prompt(request.prompt_token_ids)
    validate_terms(request.max_tokens, request.sampling, request.ttft_slo_s, request.tpot_slo_s)
    return request
