"""A global queue shared fairly between tenants: the least-served tenant's request goes first (VTC).

Virtual Token Counter (Sheng et al., "Fairness in Serving Large Language Models", OSDI 2024): each tenant
has a counter of the service it received; ``pop`` takes from the waiting tenant with the smallest counter,
and within a tenant the queue policy's order holds (each tenant has its own ``GlobalQueue``). A popped
request adds its prompt tokens plus its forecast output tokens to its tenant's counter (the forecast stands
for the output, which is unknown at dispatch). A tenant that starts waiting again is lifted to the smallest
counter of those waiting (or to the last served one's when none waits), so idling earns no credit.

The policy's tiers outrank fairness: a tenant is picked by its first request's time-free tiers (the
key without its score: the explicit priority, RT before BE under ``rtbe``, deadlines first under ``lstf``),
then by its counter. So a real-time request never waits behind another tenant's best-effort one, and
fairness decides among requests of the same tier.
"""

from __future__ import annotations

from typing import Any

from forethought.queueing.global_queue import GlobalQueue, QueueFull, retry_after
from forethought.queueing.policy import QueuedRequest, QueuePolicy


class FairQueue:
    """Waiting requests of every tenant, popped least-served tenant first; ``GlobalQueue``'s interface.

    Args:
        policy: the order within a tenant.
        capacity: most requests waiting at once, all tenants together.
        drain_window_s, max_retry_after_s: as ``GlobalQueue``'s, for the retry hint of a full queue.
    """

    def __init__(self, policy: QueuePolicy, capacity: int = 10_000, drain_window_s: float = 10.0,
                 max_retry_after_s: float = 5.0) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.policy = policy
        self.capacity = capacity
        self._drain_window_s = drain_window_s
        self._max_retry_after_s = max_retry_after_s
        self._queues: dict[str, GlobalQueue] = {}  # tenant -> its waiting requests (kept when empty: its drain rate)
        self.counters: dict[str, float] = {}  # tenant -> service received (tokens)
        self._tenant_of: dict[str, str] = {}  # waiting request id -> tenant
        self._last_served = 0.0  # the counter of the tenant served last

    def __len__(self) -> int:
        return len(self._tenant_of)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._tenant_of

    def push(self, request: QueuedRequest, now: float) -> None:
        """Admits ``request`` into its tenant's queue; QueueFull at capacity, ValueError for a waiting id."""
        if request.request_id in self._tenant_of:
            raise ValueError(f"request_id {request.request_id!r} is already queued")
        if len(self) >= self.capacity:
            raise QueueFull(self.capacity, self.retry_after_s(now))
        queue = self._queues.get(request.tenant)
        if queue is None:
            queue = self._queues[request.tenant] = GlobalQueue(self.policy, self.capacity, self._drain_window_s,
                                                               self._max_retry_after_s)
        if not len(queue):
            self._lift(request.tenant)
        queue.push(request, now)
        self._tenant_of[request.request_id] = request.tenant

    def peek(self, now: float) -> QueuedRequest | None:
        tenant = self._next_tenant()
        return None if tenant is None else self._queues[tenant].peek(now)

    def pop(self, now: float) -> QueuedRequest | None:
        """The first request of the least-served waiting tenant; charges its tokens to that tenant."""
        tenant = self._next_tenant()
        if tenant is None:
            return None
        request = self._queues[tenant].pop(now)
        assert request is not None  # NOTE: _next_tenant only names tenants with a waiting request
        del self._tenant_of[request.request_id]
        self.counters[tenant] += request.prompt_tokens + request.predicted_output_tokens
        self._last_served = self.counters[tenant]
        return request

    def remove(self, request_id: str) -> QueuedRequest | None:
        tenant = self._tenant_of.pop(request_id, None)
        return None if tenant is None else self._queues[tenant].remove(request_id)

    def revise(self, request_id: str, **changes: Any) -> QueuedRequest:
        """Changes fields of a waiting request and re-orders it within its tenant; KeyError when not waiting."""
        return self._queues[self._tenant_of[request_id]].revise(request_id, **changes)

    def ordered(self, now: float) -> list[QueuedRequest]:
        """Every waiting request, each tenant's in policy order, tenants in the order ``pop`` picks them now (for
        inspection and draining; the interleaving of later pops depends on what they charge)."""
        tenants = sorted(self._waiting(), key=lambda tenant: (self._tiers(tenant), self.counters[tenant], tenant))
        return [request for tenant in tenants for request in self._queues[tenant].ordered(now)]

    def drain_rate(self, now: float) -> float:
        return sum(queue.drain_rate(now) for queue in self._queues.values())

    def retry_after_s(self, now: float) -> float:
        return retry_after(self.drain_rate(now), self._max_retry_after_s)

    def at_share(self, tenant: str, limit: int) -> bool:
        """Whether ``limit`` requests wait and ``tenant`` holds its equal share of them.

        The share is among the tenants waiting, ``tenant`` counted, so a tenant sending less than the others
        is still admitted when a flooding one filled the limit (the total then passes it by at most one
        request per tenant).
        """
        if len(self) < limit:
            return False
        own = self._queues.get(tenant)
        held = len(own) if own is not None else 0
        tenants = len(self._waiting()) + (0 if held else 1)
        return held * tenants >= limit

    def _waiting(self) -> list[str]:
        return [tenant for tenant, queue in self._queues.items() if len(queue)]

    def _next_tenant(self) -> str | None:
        return min(self._waiting(), key=lambda tenant: (self._tiers(tenant), self.counters[tenant], tenant), default=None)

    def _tiers(self, tenant: str) -> tuple[float, ...]:
        head = self._queues[tenant].peek(0.0)  # NOTE: a GlobalQueue's order does not depend on the time
        assert head is not None  # NOTE: called for waiting tenants only
        return self.policy.rank(head)[:-1]

    def _lift(self, tenant: str) -> None:
        """A tenant starts waiting: no lower than the least-served waiting tenant (or the last served)."""
        waiting = [self.counters[other] for other in self._waiting()]
        floor = min(waiting) if waiting else self._last_served
        self.counters[tenant] = max(self.counters.get(tenant, 0.0), floor)
