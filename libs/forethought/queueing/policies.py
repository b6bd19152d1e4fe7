"""Queue orders built by name: FCFS, SSJF (SSJF section 3.2), Gittins (Hermes Eq. 1), LSTF (Hermes Eq. 2)
and RT/BE classes (BROS section 4.2), each with optional aging against starvation (SSJF section 6).

Every key has the shape ``(tiers..., score)``. The score moves with time by the same amount for every
request (slack shrinks by ``now``; aging subtracts ``aging_rate`` per second waited), so ``rank`` (the key
with that shared term removed) orders requests the same way at every instant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forethought.domain import ServiceClass
from forethought.queueing.gittins import gittins_index
from forethought.queueing.policy import QueuedRequest, QueuePolicy

BROS_TTFT_SLO_S = 0.4
"""BROS's TTFT SLO for real-time requests (section 6), used when an RT request names none."""


@dataclass(frozen=True)
class _TimedOrder:
    """Shared mechanics: static key, slack drift and linear aging on the last key element.

    ``aging_rate``: score units gained per second of waiting (tokens/s for SSJF and Gittins, s/s for
    slack orders); 0 disables aging.
    """

    aging_rate: float = 0.0

    name = "abstract"
    drift = 0.0  # how fast the score of every request falls with time (1.0 for slack)

    def __post_init__(self) -> None:
        if self.aging_rate < 0:
            raise ValueError(f"aging_rate must be >= 0, got {self.aging_rate}")

    def static_key(self, request: QueuedRequest) -> tuple[float, ...]:
        raise NotImplementedError

    def key(self, request: QueuedRequest, now: float) -> tuple[float, ...]:
        *tiers, score = self.static_key(request)
        # Linear in ``now`` on purpose: a clamp or curve here would let two requests swap order.
        waited = now - request.arrival_s
        return (*tiers, score - self.drift * now - self.aging_rate * waited)

    def rank(self, request: QueuedRequest) -> tuple[float, ...]:
        *tiers, score = self.static_key(request)
        return (*tiers, score + self.aging_rate * request.arrival_s)


@dataclass(frozen=True)
class FcfsPolicy(_TimedOrder):
    """First come, first served; an explicit ``priority`` (lower first) comes before arrival."""

    name = "fcfs"

    def static_key(self, request: QueuedRequest) -> tuple[float, ...]:
        return (request.priority, request.arrival_s)


@dataclass(frozen=True)
class SsjfPolicy(_TimedOrder):
    """Speculative shortest job first: shortest predicted output first (SSJF section 3.2).

    ``default_output_tokens``: the size assumed when the predictor gave nothing (prediction <= 0).
    """

    default_output_tokens: float = 256.0

    name = "ssjf"

    def static_key(self, request: QueuedRequest) -> tuple[float, ...]:
        predicted = request.predicted_output_tokens
        return (request.priority, predicted if predicted > 0 else self.default_output_tokens)


@dataclass(frozen=True)
class GittinsPolicy(_TimedOrder):
    """Lowest Gittins rank first (Hermes Eq. 1), after the explicit ``priority``.

    A step of an application run takes its run's rank (``application_rank``, seconds of remaining demand
    from the demand service), so every step of a short application passes the steps of a long one. Any
    other request is ranked by its own predicted output-length quantiles (the point prediction when
    there are none). Scores are in output tokens: an application's seconds become tokens at
    ``seconds_per_output_token``, so both kinds share one queue.
    """

    default_output_tokens: float = 256.0
    seconds_per_output_token: float = 0.02

    name = "gittins"

    def static_key(self, request: QueuedRequest) -> tuple[float, ...]:
        if request.application_rank is not None:
            return (request.priority, request.application_rank / self.seconds_per_output_token)
        if request.predicted_quantiles:
            return (request.priority, gittins_index(request.predicted_quantiles))
        predicted = request.predicted_output_tokens
        return (request.priority, predicted if predicted > 0 else self.default_output_tokens)


@dataclass(frozen=True)
class LstfPolicy(_TimedOrder):
    """Least slack time first (Hermes Eq. 2): ``deadline - now - remaining time``.

    A step of an application run takes its run's estimated remaining time (``application_remaining_s``,
    from the demand service) against the run's deadline; any other request its worst case, the largest
    predicted quantile (or the point prediction) times ``seconds_per_output_token``. Requests without
    a deadline follow all with one, oldest first.
    """

    seconds_per_output_token: float = 0.02
    default_output_tokens: float = 256.0

    name = "lstf"
    drift = 1.0

    def static_key(self, request: QueuedRequest) -> tuple[float, ...]:
        if request.deadline_s <= 0:
            return (request.priority, 1.0, request.arrival_s)
        return (request.priority, 0.0, request.deadline_s - self.worst_case_remaining_s(request))

    def worst_case_remaining_s(self, request: QueuedRequest) -> float:
        if request.application_remaining_s is not None:
            return request.application_remaining_s
        if request.predicted_quantiles:
            tokens = max(request.predicted_quantiles)
        elif request.predicted_output_tokens > 0:
            tokens = request.predicted_output_tokens
        else:
            tokens = self.default_output_tokens
        return tokens * self.seconds_per_output_token


@dataclass(frozen=True)
class RtBePolicy(_TimedOrder):
    """Real-time requests by slack to their TTFT deadline, then best-effort requests oldest first.

    Follows BROS section 4.2 (RT in ascending remaining time to the SLO, BE fills behind).
    ``default_ttft_slo_s`` applies to RT requests that carry no SLO.
    """

    default_ttft_slo_s: float = BROS_TTFT_SLO_S

    name = "rtbe"
    drift = 1.0

    def static_key(self, request: QueuedRequest) -> tuple[float, ...]:
        if request.service_class is ServiceClass.RT:
            slo = request.ttft_slo_s if request.ttft_slo_s > 0 else self.default_ttft_slo_s
            return (request.priority, 0.0, request.arrival_s + slo)
        return (request.priority, 1.0, request.arrival_s)


_POLICIES: dict[str, Callable[..., QueuePolicy]] = {
    FcfsPolicy.name: FcfsPolicy,
    SsjfPolicy.name: SsjfPolicy,
    GittinsPolicy.name: GittinsPolicy,
    LstfPolicy.name: LstfPolicy,
    RtBePolicy.name: RtBePolicy,
}

POLICY_NAMES: tuple[str, ...] = tuple(_POLICIES)


def build_policy(name: str, **options: Any) -> QueuePolicy:
    """Builds a queue policy by name; ``options`` are the policy's fields (e.g. ``aging_rate``).

    Raises:
        ValueError: unknown name or option, with the valid choices in the message.
    """
    factory = _POLICIES.get(name)
    if factory is None:
        raise ValueError(f"unknown queue policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")
    try:
        return factory(**options)
    except TypeError as error:
        raise ValueError(f"bad options for queue policy {name!r}: {error}") from None
