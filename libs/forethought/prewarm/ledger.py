"""Prewarmed-backend ledger: TTL expiry, hits and waste (Hermes section 3.4, Fig. 8).

Prewarming is a bet that a backend will be used soon. A prewarmed entry used before its TTL is a hit,
and its warm-up time is the benefit (time taken off the critical path); one left idle until the TTL
passes expires and counts as waste (count and idle seconds): the quantities Hermes trades off with its
knob K, tallied per kind. Pure: the clock is injected and nothing is released here;
the agent releases what ``expire()`` returns.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable
from dataclasses import dataclass


class PrewarmKind(enum.Enum):
    """What is warmed (Hermes section 3.4): KV prefix, LoRA adapter, model, non-LLM tool backend."""

    KV_PREFIX = "kv_prefix"
    LORA = "lora"
    MODEL = "model"
    TOOL = "tool"


@dataclass(frozen=True)
class PrewarmMetrics:
    """Counters since start: ``benefit_s`` sums the warm-up time of every entry used before its TTL,
    ``wasted_idle_s`` the idle time of every expired entry."""

    warmed: int = 0
    hits: int = 0
    benefit_s: float = 0.0
    wasted: int = 0
    wasted_idle_s: float = 0.0
    unsupported: int = 0
    failed: int = 0

    def __add__(self, other: PrewarmMetrics) -> PrewarmMetrics:
        return PrewarmMetrics(**{name: getattr(self, name) + getattr(other, name) for name in _METRIC_NAMES})


_METRIC_NAMES: tuple[str, ...] = tuple(PrewarmMetrics.__dataclass_fields__)


@dataclass(frozen=True)
class ExpiredEntry:
    kind: PrewarmKind
    key: Hashable
    idle_s: float


class PrewarmLedger:
    """Which prewarmed backends wait unused, since when, and the hit/waste tally."""

    def __init__(self, ttl_s: float, clock: Callable[[], float]) -> None:
        if ttl_s <= 0:
            raise ValueError("ttl_s must be positive")
        self.ttl_s = ttl_s
        self._clock = clock
        self._ready_since: dict[tuple[PrewarmKind, Hashable], float] = {}
        self._warmup_s: dict[tuple[PrewarmKind, Hashable], float] = {}
        self._by_kind = {kind: PrewarmMetrics() for kind in PrewarmKind}

    def warmed(self, kind: PrewarmKind, key: Hashable, warmup_s: float = 0.0) -> None:
        """A prewarm finished after ``warmup_s``; warming an entry again restarts its TTL."""
        self._ready_since[(kind, key)] = self._clock()
        self._warmup_s[(kind, key)] = warmup_s
        self._bump(kind, warmed=1)

    def declined(self, kind: PrewarmKind, unsupported: bool) -> None:
        """A prewarm that could not be done: unsupported here, or failed while trying."""
        self._bump(kind, unsupported=int(unsupported), failed=int(not unsupported))

    def is_waiting(self, kind: PrewarmKind, key: Hashable) -> bool:
        """True while a prewarmed entry waits unused and unexpired."""
        since = self._ready_since.get((kind, key))
        return since is not None and self._clock() - since < self.ttl_s

    def use(self, kind: PrewarmKind, key: Hashable) -> bool:
        """The backend is now used: a hit when it was prewarmed and had not expired."""
        if not self.is_waiting(kind, key):
            return False
        del self._ready_since[(kind, key)]
        self._bump(kind, hits=1, benefit_s=self._warmup_s.pop((kind, key), 0.0))
        return True

    def waiting_keys(self, kind: PrewarmKind) -> list[Hashable]:
        return [key for (k, key) in self._ready_since if k == kind]

    def expire(self) -> list[ExpiredEntry]:
        """Removes entries idle for at least the TTL and counts them as waste."""
        now = self._clock()
        expired = [
            ExpiredEntry(kind, key, now - since)
            for (kind, key), since in self._ready_since.items()
            if now - since >= self.ttl_s
        ]
        for entry in expired:
            del self._ready_since[(entry.kind, entry.key)]
            self._warmup_s.pop((entry.kind, entry.key), None)
            self._bump(entry.kind, wasted=1, wasted_idle_s=entry.idle_s)
        return expired

    def metrics(self, kind: PrewarmKind | None = None) -> PrewarmMetrics:
        """The tally of one kind, or of every kind together."""
        if kind is not None:
            return self._by_kind[kind]
        return sum(self._by_kind.values(), PrewarmMetrics())

    def _bump(self, kind: PrewarmKind, **increments: float) -> None:
        self._by_kind[kind] = self._by_kind[kind] + PrewarmMetrics(**increments)  # type: ignore[arg-type]
