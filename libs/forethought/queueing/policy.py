"""What a global queue orders: the request record and the ordering-policy protocol.

Policies (FCFS, SSJF, Gittins, LSTF, RT/BE classes) live beside this module and are built by name;
the live scheduler and the simulator order their queues with the same objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from forethought.domain import ServiceClass


@dataclass
class QueuedRequest:
    """A request waiting in a global queue.

    ``predicted_quantiles``: output-length quantiles (p10..p90, in tokens) when the predictor gave them.
    ``deadline_s``: absolute time by which the request (or its application) must finish; 0 means none.
    ``priority``: an explicit override, lower first; the scheduler may change it while the request waits.
    ``application_rank``: the Gittins rank (Hermes Eq. 1, seconds) of the application run the request is a
    step of, from the demand service; None for a request outside an application.
    ``application_remaining_s``: that run's estimated remaining service time (Hermes 3.2); None outside one.
    ``tenant``: the tenant that sent it (``forethought.access``); "" without tenants. ``FairQueue`` shares by it.
    """

    request_id: str
    arrival_s: float
    prompt_tokens: int
    predicted_output_tokens: float = 0.0
    predicted_quantiles: Sequence[float] = ()
    service_class: ServiceClass = ServiceClass.BE
    ttft_slo_s: float = 0.0
    deadline_s: float = 0.0
    priority: float = 0.0
    application_id: str = ""
    application_rank: float | None = None
    application_remaining_s: float | None = None
    tenant: str = ""


class QueuePolicy(Protocol):
    """Orders waiting requests: the one with the smallest key is dispatched first."""

    name: str

    def key(self, request: QueuedRequest, now: float) -> tuple[float, ...]:
        """Sort key at time ``now`` (keys may change with time, e.g. aging or slack)."""

    def rank(self, request: QueuedRequest) -> tuple[float, ...]:
        """A time-free key that orders requests exactly as ``key`` does at every ``now``.

        NOTE: every built-in key moves with time only by a term shared by all requests (``-now`` in
        slack, ``-rate * now`` in aging), so the order of two waiting requests never flips by itself.
        That is what lets ``GlobalQueue`` keep a heap; an order change comes only from
        ``GlobalQueue.update_priority``.
        """


ENGINE_PRIORITY_BAND = 1 << 30
"""Engine priorities of RT requests lie below this, BE requests at or above it."""


def engine_priority(policy: QueuePolicy, request: QueuedRequest) -> int:
    """The priority an engine orders its local queue by (lower first, vLLM's convention).

    RT comes before BE; within a class, the policy's own time-free score (SSJF's predicted length, the
    Gittins index, slack, arrival), so the engine keeps the global queue's order among what it holds.
    """
    score = min(max(int(policy.rank(request)[-1]) + ENGINE_PRIORITY_BAND // 2, 0), ENGINE_PRIORITY_BAND - 1)
    return score if request.service_class == ServiceClass.RT else ENGINE_PRIORITY_BAND + score
