"""What the engine core asks of an executor: the time one iteration takes (BROS section 4.1, Eq. 2-5).

``BatchShape`` is the contract between scheduler and executor: tokens to prefill, decode requests and the
context they attend to, and the KV slots to copy between GPU and host for lazy checkpointing. The cost-model
executor (``forethought.costmodel``) turns it into modelled seconds; a torch executor would run it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class BatchShape:
    """The inputs of one iteration's latency.

    Attributes:
        prefill_tokens: new prompt (or recomputed) tokens computed this iteration, chunks included.
        prefill_requests: requests contributing those tokens.
        prefill_context_tokens: tokens already held by those requests that their new tokens attend to.
        decode_requests: requests computing one token each.
        decode_context_tokens: total context length the decode requests attend to.
        swap_in_slots: checkpointed KV slots copied host -> GPU before the iteration.
        swap_out_slots: KV slots copied GPU -> host because RT requests overwrite them.
    """

    prefill_tokens: int = 0
    prefill_requests: int = 0
    prefill_context_tokens: int = 0
    decode_requests: int = 0
    decode_context_tokens: int = 0
    swap_in_slots: int = 0
    swap_out_slots: int = 0

    @property
    def num_requests(self) -> int:
        return self.prefill_requests + self.decode_requests

    @property
    def is_empty(self) -> bool:
        return self.num_requests == 0


@runtime_checkable
class Executor(Protocol):
    """Runs (or models) one iteration and says how long it took, in seconds."""

    def iteration_time(self, batch: BatchShape) -> float: ...


@runtime_checkable
class IterationEstimator(Protocol):
    """An executor that can also predict an iteration's time without running it (BROS's cost model).

    The scheduler uses the estimate to keep a batch within the tightest RT deadline; an executor that
    only implements ``Executor`` must have a side-effect-free ``iteration_time``, which is then used.
    """

    def estimate_iteration_time(self, batch: BatchShape) -> float: ...
