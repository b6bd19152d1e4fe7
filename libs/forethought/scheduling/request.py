"""One request's life at the global scheduler (Preble section 4.1: request-level scheduling).

A request waits in the global queue (QUEUED), is taken for placement (PLACING: its prefix match is under
way), runs on a worker before its first token (DISPATCHED) and after it (STREAMING), then ends. The
order of the enum is the order of the life: ``is_finished`` is ``status >= FINISHED``, and failover
reads ``status < STREAMING`` as "no token reached the client, a retry is invisible".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from forethought.domain import GenerationRequest
from forethought.queueing.policy import QueuedRequest

MIN_TTFT_SLO_S = 0.001
"""The TTFT objective a worker is sent once the wait here used it all up: still set, so still most urgent."""


class PlacementStatus(enum.IntEnum):
    QUEUED = 1
    PLACING = 2
    DISPATCHED = 3
    STREAMING = 4
    FINISHED = 5
    CANCELLED = 6
    FAILED = 7

    @property
    def is_finished(self) -> bool:
        return self >= PlacementStatus.FINISHED

    @property
    def on_worker(self) -> bool:
        return self in (PlacementStatus.DISPATCHED, PlacementStatus.STREAMING)


@dataclass
class ScheduledRequest:
    """A request the scheduler accepted: what the queue orders, what placement needs, what the worker runs.

    ``model``: the served model (only its workers are candidates). ``block_hashes``: the prompt's chained
    block hashes (``forethought.domain.block_hashes``). ``generation``: the engine request as submitted.
    Placement decides ``worker_id`` and ``engine_priority`` (the global order, as the engine reads it).
    ``attempts``: dispatches so far (retries add one each). ``output_tokens``: the output's length once
    its stream ended with usage.
    """

    queued: QueuedRequest
    model: str
    block_hashes: tuple[int, ...]
    block_size: int
    generation: GenerationRequest
    status: PlacementStatus = PlacementStatus.QUEUED
    worker_id: str = ""
    engine_priority: int = 0
    attempts: int = 0
    dispatched_s: float = 0.0
    first_token_s: float = 0.0
    output_tokens: int | None = None

    @property
    def request_id(self) -> str:
        return self.queued.request_id

    @property
    def prompt_tokens(self) -> int:
        return self.queued.prompt_tokens

    def ttft_slo_left_s(self) -> float:
        """Of the TTFT objective, what was left at dispatch (0: none). An engine counts the objective from its own
        arrival and serves an RT request just in time (BROS section 4.2): given the whole of it, it would spend
        the wait in the global queue twice."""
        ttft_slo_s = self.generation.ttft_slo_s
        if ttft_slo_s <= 0:
            return 0.0
        return max(MIN_TTFT_SLO_S, ttft_slo_s - (self.dispatched_s - self.queued.arrival_s))

    def worker_request(self) -> GenerationRequest:
        """What the placed request's worker is sent: the engine request with the priority placement chose and
        the TTFT objective left."""
        return replace(self.generation, priority=self.engine_priority, ttft_slo_s=self.ttft_slo_left_s())
