"""One request's state inside the engine core (BROS section 4.1, Table 1).

A request is one dataclass with an ordered status: ``is_finished`` is ``status > RUNNING``. Counters that
the scheduler needs (tokens still to compute, remaining time to the TTFT or TPOT deadline) are derived
properties, never stored twice. Token lists are handed out as read-only tuples.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from forethought.domain import (
    FinishReason,
    GenerationRequest,
    SamplingParams,
    ServiceClass,
    validate_generation,
)
from forethought.domain.block_hashes import chained_block_hashes


class EngineRequestStatus(enum.IntEnum):
    """Ordered lifecycle: WAITING (BROS waiting queue) -> RUNNING (pending queue) -> a finished state."""

    WAITING = 0
    RUNNING = 1
    FINISHED_STOPPED = 2
    FINISHED_LENGTH = 3
    FINISHED_ABORTED = 4

    @property
    def is_finished(self) -> bool:
        return self > EngineRequestStatus.RUNNING

    @property
    def finish_reason(self) -> FinishReason | None:
        return _FINISH_REASONS.get(self)


_FINISH_REASONS = {
    EngineRequestStatus.FINISHED_STOPPED: FinishReason.STOP,
    EngineRequestStatus.FINISHED_LENGTH: FinishReason.LENGTH,
    EngineRequestStatus.FINISHED_ABORTED: FinishReason.ABORT,
}


@dataclass(eq=False)
class EngineRequest:
    """A request and its progress.

    ``num_computed_tokens`` counts tokens whose KV is held (on GPU or checkpointed on the host tier);
    a new token is sampled whenever every known token has been computed. ``num_hashed_blocks`` counts
    prompt blocks already offered to the prefix cache.
    """

    request_id: str
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    service_class: ServiceClass
    priority: int
    ttft_slo_s: float
    tpot_slo_s: float
    sampling: SamplingParams
    arrival_s: float
    sequence: int
    block_size: int
    status: EngineRequestStatus = EngineRequestStatus.WAITING
    num_computed_tokens: int = 0
    num_cached_prompt_tokens: int = 0
    num_hashed_blocks: int = 0
    first_scheduled_s: float | None = None
    first_token_s: float | None = None
    last_token_s: float | None = None
    _output_token_ids: list[int] = field(default_factory=list)
    _prompt_block_hashes: tuple[int, ...] | None = None
    num_prompt_tokens: int = field(init=False, repr=False)
    is_rt: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # NOTE: fixed at creation (the prompt and the class never change) and read for every request in
        # every iteration, so they are plain attributes rather than properties.
        self.num_prompt_tokens = len(self.prompt_token_ids)
        self.is_rt = self.service_class == ServiceClass.RT

    @classmethod
    def from_generation(
        cls, request: GenerationRequest, now: float, sequence: int, block_size: int,
        prompt_block_hashes: Sequence[int] | None = None,
    ) -> EngineRequest:
        """Validates a ``GenerationRequest`` (``InvalidField``) and wraps it; ``sequence`` orders equal arrival
        times. ``prompt_block_hashes``: the prompt's chained block hashes when the caller has them already
        (computed here otherwise, on first use)."""
        validate_generation(request)
        hashes = None
        if prompt_block_hashes is not None:
            hashes = tuple(prompt_block_hashes)
            if len(hashes) != len(request.prompt_token_ids) // block_size:
                raise ValueError(f"{len(hashes)} prompt block hashes for "
                                 f"{len(request.prompt_token_ids) // block_size} full blocks")
        return cls(
            request_id=request.request_id,
            prompt_token_ids=tuple(request.prompt_token_ids),
            max_tokens=request.max_tokens,
            service_class=request.service_class,
            priority=request.priority,
            ttft_slo_s=request.ttft_slo_s,
            tpot_slo_s=request.tpot_slo_s,
            sampling=request.sampling,
            arrival_s=now,
            sequence=sequence,
            block_size=block_size,
            _prompt_block_hashes=hashes,
        )

    @property
    def output_token_ids(self) -> tuple[int, ...]:
        return tuple(self._output_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self._output_token_ids)

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + len(self._output_token_ids)

    @property
    def num_tokens_to_compute(self) -> int:
        """Prompt tokens left to prefill (or recompute after a drop), else 1 for the next decode."""
        return self.num_tokens - self.num_computed_tokens

    @property
    def is_prefill(self) -> bool:
        return self.num_computed_tokens < self.num_prompt_tokens

    @property
    def prompt_block_hashes(self) -> tuple[int, ...]:
        """Chained hashes of the prompt's full blocks, computed once."""
        if self._prompt_block_hashes is None:
            self._prompt_block_hashes = tuple(
                chained_block_hashes(self.prompt_token_ids, self.block_size)
            )
        return self._prompt_block_hashes

    def token_at(self, position: int) -> int:
        if position < self.num_prompt_tokens:
            return self.prompt_token_ids[position]
        return self._output_token_ids[position - self.num_prompt_tokens]

    def deadline_s(self) -> float:
        """Deadline of the next token: TTFT before the first one, TPOT after; inf for BE or no SLO."""
        if not self.is_rt:
            return math.inf
        if self.first_token_s is None:
            return self.arrival_s + self.ttft_slo_s if self.ttft_slo_s > 0 else math.inf
        assert self.last_token_s is not None  # NOTE: set together with first_token_s
        return self.last_token_s + self.tpot_slo_s if self.tpot_slo_s > 0 else math.inf

    def remaining_time_s(self, now: float) -> float:
        """BROS's urgency: time left to the next token's deadline (negative once missed)."""
        return self.deadline_s() - now

    def append_token(self, token_id: int, now: float) -> None:
        if self.first_token_s is None:
            self.first_token_s = now
        self.last_token_s = now
        self._output_token_ids.append(token_id)

    def reset_for_recompute(self) -> None:
        """After a drop the KV is gone: every known token is computed again (prefix hits aside)."""
        self.status = EngineRequestStatus.WAITING
        self.num_computed_tokens = 0
        self.num_hashed_blocks = 0
