"""One request's life at the global scheduler (Preble section 4.1: request-level scheduling).

A request waits in the global queue (QUEUED), is taken for placement (PLACING: its prefix match is under
way), runs on a worker before its first token (DISPATCHED) and after it (STREAMING), then ends. The
order of the enum is the order of the life: ``is_finished`` is ``status >= FINISHED``, and failover
reads ``status < STREAMING`` as "no token reached the client, a retry is invisible".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from forethought.queueing.policy import QueuedRequest


class RequestStatus(enum.IntEnum):
    QUEUED = 1
    PLACING = 2
    DISPATCHED = 3
    STREAMING = 4
    FINISHED = 5
    CANCELLED = 6
    FAILED = 7

    @property
    def is_finished(self) -> bool:
        return self >= RequestStatus.FINISHED

    @property
    def on_worker(self) -> bool:
        return self in (RequestStatus.DISPATCHED, RequestStatus.STREAMING)


@dataclass
class ScheduledRequest:
    """A request the scheduler accepted: what the queue orders and what placement needs.

    ``model``: the served model (only its workers are candidates). ``block_hashes``: the prompt's chained
    block hashes (``forethought.domain.block_hashes``). ``attempts``: dispatches so far (retries add one each).
    """

    queued: QueuedRequest
    model: str
    block_hashes: tuple[int, ...]
    block_size: int
    status: RequestStatus = RequestStatus.QUEUED
    worker_id: str = ""
    attempts: int = 0
    dispatched_s: float = 0.0

    @property
    def request_id(self) -> str:
        return self.queued.request_id

    @property
    def prompt_tokens(self) -> int:
        return self.queued.prompt_tokens
