"""Per-tenant admission: requests/s and tokens/min as token buckets, and a cap on concurrent streams.

A request is admitted when the tenant has a stream free, a request token in its bucket, and a tokens/min
bucket above zero; its prompt and output tokens are charged when it finishes (what it used, not what it
might use), so one long answer may take the bucket below zero and later requests wait until it refills.
A refusal says which limit and when a retry can pass. Clock-injected; one ledger per scheduler replica.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from forethought.access.tenants import Quota, Tenant

STREAM_RETRY_S = 1.0
"""The retry hint of a refusal for open streams: when one ends is unknown, so a second."""


class QuotaExceeded(Exception):
    """A tenant is over one of its limits; ``retry_after_s``: when a retry may pass."""

    def __init__(self, tenant: str, limit: str, retry_after_s: float) -> None:
        super().__init__(f"tenant {tenant!r} is over its {limit} quota")
        self.tenant = tenant
        self.limit = limit
        self.retry_after_s = retry_after_s


class TokenBucket:
    """``capacity`` tokens refilled at ``rate`` per second; a level below zero is debt paid back by refill."""

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self._level = capacity
        self._at = now

    def level(self, now: float) -> float:
        self._level = min(self.capacity, self._level + (now - self._at) * self.rate)
        self._at = now
        return self._level

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until the level reaches ``amount`` (0 when it has)."""
        return max(0.0, (amount - self.level(now)) / self.rate)

    def take(self, amount: float, now: float) -> None:
        """Removes ``amount``, going into debt if the level is lower."""
        self._level = self.level(now) - amount


@dataclass
class _TenantState:
    requests: TokenBucket | None
    tokens: TokenBucket | None
    streams: int = 0


class QuotaLedger:
    """Every tenant's buckets and open streams on this replica.

    Args:
        clock: seconds, monotonic (``time.monotonic`` in the service).
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._states: dict[str, _TenantState] = {}

    def admit(self, tenant: Tenant) -> None:
        """Counts one request and one open stream against ``tenant``; QuotaExceeded (nothing counted) when over."""
        now = self._clock()
        state = self._state(tenant, now)
        quota = tenant.quota
        if quota.max_streams and state.streams >= quota.max_streams:
            raise QuotaExceeded(tenant.name, f"max_streams ({quota.max_streams} open)", STREAM_RETRY_S)
        if state.tokens is not None:
            wait = state.tokens.wait_for(1e-9, now)  # any positive level admits; debt waits for the refill
            if wait > 0:
                raise QuotaExceeded(tenant.name, f"tokens_per_min ({quota.tokens_per_min})", wait)
        if state.requests is not None:
            wait = state.requests.wait_for(1.0, now)
            if wait > 0:
                raise QuotaExceeded(tenant.name, f"requests_per_s ({quota.requests_per_s:g})", wait)
            state.requests.take(1.0, now)
        state.streams += 1

    def finish(self, tenant: Tenant, tokens: int) -> None:
        """An admitted request ended having used ``tokens`` (prompt plus output; 0 when unknown)."""
        now = self._clock()
        state = self._state(tenant, now)
        state.streams = max(0, state.streams - 1)
        if state.tokens is not None and tokens > 0:
            state.tokens.take(float(tokens), now)

    def open_streams(self, tenant: str) -> int:
        state = self._states.get(tenant)
        return state.streams if state is not None else 0

    def _state(self, tenant: Tenant, now: float) -> _TenantState:
        state = self._states.get(tenant.name)
        if state is None:
            state = self._states[tenant.name] = _new_state(tenant.quota, now)
        return state


def _new_state(quota: Quota, now: float) -> _TenantState:
    requests = TokenBucket(quota.requests_per_s, quota.request_burst, now) if quota.requests_per_s else None
    tokens = TokenBucket(quota.tokens_per_min / 60.0, float(quota.tokens_per_min), now) if quota.tokens_per_min else None
    return _TenantState(requests, tokens)
