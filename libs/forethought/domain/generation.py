"""One generation as every layer names it: its class, sampling, the request an engine runs, and its output.

The service classes are BROS's (section 3): real-time requests with TTFT/TPOT SLOs, and best-effort work.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class ServiceClass(enum.IntEnum):
    """Request class (BROS section 3): real-time with SLOs, or best-effort throughput work."""

    RT = 1
    BE = 2


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False


@dataclass(frozen=True)
class GenerationRequest:
    """One request as an engine sees it.

    ``priority``: lower runs first (vLLM's convention); the scheduler maps class and rank onto it.
    ``ttft_slo_s`` / ``tpot_slo_s``: RT deadlines; 0 means none.
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
class GenerationChunk:
    """Tokens produced since the previous chunk; the last chunk carries ``finish_reason`` and ``usage``.

    ``text`` comes from an engine that detokenizes (``EngineBackend.detokenizes``); it need not be the
    text of this chunk's tokens (vLLM holds text back while a stop string may match).
    """

    request_id: str
    token_ids: tuple[int, ...]
    text: str = ""
    finish_reason: FinishReason | None = None
    usage: Usage | None = None

