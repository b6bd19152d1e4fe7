"""Building one iteration's batch: the shared bookkeeping of every scheduling policy (BROS section 4.2).

A policy proposes requests in its order; ``BatchBuilder`` decides how many tokens each gets (a decode
step, or a prefill chunk cut to the chunked-prefill token budget, Sarathi/Preble section 4.3), keeps a
conservative count of the KV slots the batch will need, and estimates the batch's iteration time with the
engine's cost model, so policies read as the paper's pseudocode.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from forethought.engine.executor import BatchShape
from forethought.engine.request import EngineRequest, EngineRequestStatus

# NOTE: looking up an enum member (``EngineRequestStatus.WAITING``) costs a descriptor call on Python 3.11,
# about ten times a global read; the per-request loops read these aliases instead.
_WAITING = EngineRequestStatus.WAITING


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
    rt_slots_dropping_be: Callable[[EngineRequest], int]
    checkpointed_slots: Callable[[EngineRequest], int]
    cached_tokens: Callable[[EngineRequest], int]


class BatchItem(NamedTuple):
    """A request in a batch and the tokens it computes (a tuple: one is made per request per iteration)."""

    request: EngineRequest
    num_tokens: int


@dataclass(frozen=True)
class Selection:
    """A policy's answer: the batch in commit order, and the batch limit it used."""

    scheduled: tuple[BatchItem, ...]
    batch_limit: int


def tokens_to_compute(ctx: SchedulingContext, request: EngineRequest) -> int:
    """Tokens the request still needs computed, after the prefix-cache hit a waiting request will get."""
    if request.status == EngineRequestStatus.WAITING and request.num_computed_tokens == 0:
        return request.num_tokens_to_compute - ctx.cached_tokens(request)
    return request.num_tokens_to_compute


class ShapeTally:
    """Running sums of a batch's shape: adding or removing a request costs O(1), not a pass over the batch.

    ``held`` is the request's context before the iteration: at or past its prompt it decodes one token.
    """

    def __init__(self) -> None:
        self.prefill_tokens = self.prefill_requests = self.prefill_context = 0
        self.decode_requests = self.decode_context = 0

    def add(self, request: EngineRequest, num_tokens: int, held: int, sign: int = 1) -> None:
        if held >= request.num_prompt_tokens:
            self.decode_requests += sign
            self.decode_context += sign * held
        else:
            self.prefill_requests += sign
            self.prefill_tokens += sign * num_tokens
            self.prefill_context += sign * held

    def shape(self, swap_in_slots: int = 0, swap_out_slots: int = 0) -> BatchShape:
        return BatchShape(
            prefill_tokens=self.prefill_tokens,
            prefill_requests=self.prefill_requests,
            prefill_context_tokens=self.prefill_context,
            decode_requests=self.decode_requests,
            decode_context_tokens=self.decode_context,
            swap_in_slots=swap_in_slots,
            swap_out_slots=swap_out_slots,
        )


class BatchBuilder:
    """Accumulates a batch under the batch-size limit, the token budget and the KV slots available."""

    def __init__(self, ctx: SchedulingContext, batch_limit: int) -> None:
        self.ctx = ctx
        self.batch_limit = batch_limit
        self._items: list[BatchItem] = []
        self._members: set[int] = set()
        self._reserved_slots = 0
        self._tokens = 0
        self._swap_in_slots = 0
        self._tally = ShapeTally()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, request: EngineRequest) -> bool:
        return id(request) in self._members

    @property
    def items(self) -> tuple[BatchItem, ...]:
        return tuple(self._items)

    @property
    def is_full(self) -> bool:
        return len(self._items) >= self.batch_limit

    @property
    def tokens_left(self) -> int:
        return self.ctx.token_budget - self._tokens

    def try_add(
        self, request: EngineRequest, max_tokens: int | None = None, may_drop: bool = False,
        drops_be: bool = False,
    ) -> bool:
        """Adds the request with as many tokens as budget, memory and ``max_tokens`` allow; False when none
        fit. ``may_drop``: memory is not checked, the scheduler drops requests ranked behind it to commit it
        (BROS 5.2's progressive dropping, for RT that must not wait). ``drops_be``: an RT request ranked
        before every BE one counts the memory that dropping running BE requests frees (the scheduler drops
        BE first, newest first), so BE-held memory never keeps it waiting."""
        items = self._items
        if len(items) >= self.batch_limit:
            return False
        ctx = self.ctx
        # NOTE: inlines tokens_to_compute and _held_tokens, the hot path of every policy.
        held = request.num_computed_tokens
        if held == 0 and request.status == _WAITING:
            held = ctx.cached_tokens(request)
        wanted = min(request.num_tokens - held, ctx.token_budget - self._tokens)
        if max_tokens is not None:
            wanted = min(wanted, max_tokens)
        checkpointed = ctx.checkpointed_slots(request)
        # The batch's head may still run by dropping others when the scheduler commits it.
        if items and not may_drop:
            free = ctx.rt_slots_dropping_be(request) if drops_be else ctx.free_slots(request)
            wanted = min(wanted, free - self._reserved_slots - checkpointed)
        if wanted <= 0:
            return False
        items.append(BatchItem(request, wanted))
        self._members.add(id(request))
        self._reserved_slots += wanted + checkpointed
        self._tokens += wanted
        self._swap_in_slots += checkpointed
        self._tally.add(request, wanted, held)
        return True

    def tokens_of(self, request: EngineRequest) -> int:
        """Tokens the batch gives ``request`` (0 when it is not in the batch)."""
        return next((item.num_tokens for item in self._items if item.request is request), 0)

    def remove(self, request: EngineRequest) -> None:
        for item in self._items:
            if item.request is request:
                checkpointed = self.ctx.checkpointed_slots(request)
                self._items.remove(item)
                self._members.discard(id(request))
                self._reserved_slots -= item.num_tokens + checkpointed
                self._tokens -= item.num_tokens
                self._swap_in_slots -= checkpointed
                self._tally.add(request, item.num_tokens, self._held_tokens(request), -1)
                return

    def overruns(self, residual_s: float) -> bool:
        """Whether the estimated iteration time exceeds ``residual_s``; an infinite one needs no estimate."""
        return residual_s != math.inf and self.estimated_time() > residual_s

    def estimated_time(self) -> float:
        if not self._items:
            return 0.0
        return self.ctx.estimate_time(self._tally.shape(swap_in_slots=self._swap_in_slots))

    def _held_tokens(self, request: EngineRequest) -> int:
        if request.status == EngineRequestStatus.WAITING and request.num_computed_tokens == 0:
            return self.ctx.cached_tokens(request)
        return request.num_computed_tokens

    def selection(self) -> Selection:
        return Selection(tuple(self._items), self.batch_limit)
