"""Building one iteration's batch: the shared bookkeeping of every scheduling policy (BROS section 4.2).

A policy proposes requests in its order; ``BatchBuilder`` decides how many tokens each gets (a decode
step, or a prefill chunk cut to the chunked-prefill token budget, Sarathi/Preble section 4.3), keeps a
conservative count of the KV slots the batch will need, and estimates the batch's iteration time with the
engine's cost model, so policies read as the paper's pseudocode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from forethought.engine.executor import BatchShape
from forethought.engine.request import EngineRequest, RequestStatus


@dataclass(frozen=True)
class SchedulingContext:
    """What a policy may look at: queues in arrival order, limits, and pure estimators."""

    now: float
    iteration: int
    running: Sequence[EngineRequest]
    waiting: Sequence[EngineRequest]
    max_batch_size: int
    token_budget: int
    estimate_time: Callable[[BatchShape], float]
    free_slots: Callable[[EngineRequest], int]
    checkpointed_slots: Callable[[EngineRequest], int]
    cached_tokens: Callable[[EngineRequest], int]


@dataclass(frozen=True)
class ScheduledRequest:
    request: EngineRequest
    num_tokens: int


@dataclass(frozen=True)
class Selection:
    """A policy's answer: the batch in commit order, and the batch limit it used."""

    scheduled: tuple[ScheduledRequest, ...]
    batch_limit: int


def tokens_to_compute(ctx: SchedulingContext, request: EngineRequest) -> int:
    """Tokens the request still needs computed, after the prefix-cache hit a waiting request will get."""
    if request.status == RequestStatus.WAITING and request.num_computed_tokens == 0:
        return request.num_tokens_to_compute - ctx.cached_tokens(request)
    return request.num_tokens_to_compute


def batch_shape(
    scheduled: Sequence[ScheduledRequest],
    held_tokens: Callable[[EngineRequest], int],
    swap_in_slots: int = 0,
    swap_out_slots: int = 0,
) -> BatchShape:
    """The executor-facing shape of a batch; ``held_tokens`` is each request's context before it."""
    prefill_tokens = prefill_requests = prefill_context = decodes = decode_context = 0
    for item in scheduled:
        held = held_tokens(item.request)
        if held >= item.request.num_prompt_tokens:
            decodes += 1
            decode_context += held
        else:
            prefill_requests += 1
            prefill_tokens += item.num_tokens
            prefill_context += held
    return BatchShape(
        prefill_tokens=prefill_tokens,
        prefill_requests=prefill_requests,
        prefill_context_tokens=prefill_context,
        decode_requests=decodes,
        decode_context_tokens=decode_context,
        swap_in_slots=swap_in_slots,
        swap_out_slots=swap_out_slots,
    )


class BatchBuilder:
    """Accumulates a batch under the batch-size limit, the token budget and the KV slots available."""

    def __init__(self, ctx: SchedulingContext, batch_limit: int) -> None:
        self.ctx = ctx
        self.batch_limit = batch_limit
        self._items: list[ScheduledRequest] = []
        self._reserved_slots = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, request: EngineRequest) -> bool:
        return any(item.request is request for item in self._items)

    @property
    def items(self) -> tuple[ScheduledRequest, ...]:
        return tuple(self._items)

    @property
    def is_full(self) -> bool:
        return len(self._items) >= self.batch_limit

    @property
    def tokens_left(self) -> int:
        return self.ctx.token_budget - sum(item.num_tokens for item in self._items)

    def try_add(self, request: EngineRequest) -> bool:
        """Adds the request with as many tokens as budget and memory allow; False when none fit."""
        if self.is_full:
            return False
        wanted = min(tokens_to_compute(self.ctx, request), self.tokens_left)
        memory = self.ctx.free_slots(request) - self._reserved_slots
        memory -= self.ctx.checkpointed_slots(request)
        # The batch's head may still run by dropping others when the scheduler commits it.
        num_tokens = min(wanted, memory) if self._items else wanted
        if num_tokens <= 0:
            return False
        self._items.append(ScheduledRequest(request, num_tokens))
        self._reserved_slots += num_tokens + self.ctx.checkpointed_slots(request)
        return True

    def remove(self, request: EngineRequest) -> None:
        for item in self._items:
            if item.request is request:
                self._items.remove(item)
                self._reserved_slots -= item.num_tokens + self.ctx.checkpointed_slots(request)
                return

    def estimated_time(self) -> float:
        if not self._items:
            return 0.0
        swap_in = sum(self.ctx.checkpointed_slots(item.request) for item in self._items)
        held = self._held_tokens
        return self.ctx.estimate_time(batch_shape(self._items, held, swap_in_slots=swap_in))

    def _held_tokens(self, request: EngineRequest) -> int:
        if request.status == RequestStatus.WAITING and request.num_computed_tokens == 0:
            return self.ctx.cached_tokens(request)
        return request.num_computed_tokens

    def selection(self) -> Selection:
        return Selection(tuple(self._items), self.batch_limit)
