"""The placement protocol every global router implements (Preble section 4.2 and the baselines).

The caller matches the prompt against a prefix index first (in memory in the simulator, Redis in the
live scheduler) and passes the result in, so a router's decision is pure and needs no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from forethought.domain import EngineStats, ServiceClass


@dataclass(frozen=True)
class RoutingRequest:
    """A request to place.

    ``cached_blocks``: worker -> leading prompt blocks that worker caches (from the prefix index).
    """

    request_id: str
    prompt_tokens: int
    block_hashes: tuple[int, ...]
    block_size: int
    predicted_output_tokens: float = 0.0
    service_class: ServiceClass = ServiceClass.BE
    cached_blocks: Mapping[str, int] = field(default_factory=dict)


class Router(Protocol):
    """Chooses a worker for each request and keeps the load history it needs."""

    name: str

    @property
    def decision(self) -> str:
        """How the latest ``choose`` decided, for metrics (E2: its phase; the others: their name)."""

    def add_worker(self, worker_id: str, now: float) -> None: ...

    def remove_worker(self, worker_id: str, now: float) -> None: ...

    def choose(self, request: RoutingRequest, now: float) -> str:
        """The worker to run ``request``; records the assignment in the router's history."""

    def on_finished(self, request_id: str, now: float, output_tokens: int | None = None) -> None:
        """The request left its worker (finished, aborted or failed); ``output_tokens`` when known."""

    def observe_load(self, worker_id: str, stats: EngineStats, now: float) -> None:
        """A live load snapshot reported by the worker."""

    def observe_ttft(self, request_id: str, ttft_s: float, now: float) -> None:
        """The placed request's first token came ``ttft_s`` after it was submitted."""
