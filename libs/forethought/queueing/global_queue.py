"""The scheduler's global wait queue: a bounded priority queue ordered by a ``QueuePolicy``.

Ordering uses the policy's time-free ``rank`` in a binary heap, so push and pop cost O(log n) however
many requests wait (see ``QueuePolicy.rank`` for why the order cannot drift with time). Removal and
priority updates mark the old heap entry stale and push a fresh one; stale entries are dropped when
they reach the top, and the heap is rebuilt once they outnumber live ones.

Admission control: a full queue refuses with ``QueueFull`` carrying a retry-after hint from the drain
rate observed over the last ``drain_window_s`` seconds.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import replace
from typing import Any

from forethought.queueing.policy import QueuedRequest, QueuePolicy


class QueueFull(Exception):
    """The queue is at capacity; ``retry_after_s`` is when a slot is expected to free up."""

    def __init__(self, capacity: int, retry_after_s: float) -> None:
        super().__init__(f"queue full ({capacity} waiting); retry after {retry_after_s:.3f} s")
        self.capacity = capacity
        self.retry_after_s = retry_after_s


def retry_after(drain_rate: float, max_retry_after_s: float) -> float:
    """One inter-pop gap at ``drain_rate`` (pops per second), at most ``max_retry_after_s`` (also when nothing drains)."""
    return max_retry_after_s if drain_rate <= 0 else min(max_retry_after_s, 1.0 / drain_rate)


_Entry = tuple[tuple[float, ...], float, int, str]  # (rank, arrival, sequence, request id)


class GlobalQueue:
    """Waiting requests in policy order.

    Args:
        policy: the order; ``rank`` keys the heap.
        capacity: most requests waiting at once.
        drain_window_s: how far back pops count towards the drain rate.
        max_retry_after_s: the hint when nothing drained recently (and the cap on any hint).
    """

    def __init__(
        self,
        policy: QueuePolicy,
        capacity: int = 10_000,
        drain_window_s: float = 10.0,
        max_retry_after_s: float = 5.0,
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.policy = policy
        self.capacity = capacity
        self._drain_window_s = drain_window_s
        self._max_retry_after_s = max_retry_after_s
        self._heap: list[_Entry] = []
        self._live: dict[str, tuple[QueuedRequest, _Entry]] = {}
        self._sequence = itertools.count()
        self._pop_times: deque[float] = deque()

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._live

    def push(self, request: QueuedRequest, now: float) -> None:
        """Admits ``request``.

        Raises:
            QueueFull: at capacity (``retry_after_s`` from the recent drain rate).
            ValueError: a request with the same id is already waiting.
        """
        if request.request_id in self._live:
            raise ValueError(f"request_id {request.request_id!r} is already queued")
        if len(self._live) >= self.capacity:
            raise QueueFull(self.capacity, self.retry_after_s(now))
        self._insert(request)

    def peek(self, now: float) -> QueuedRequest | None:
        """The request ``pop`` would return, without removing it."""
        self._drop_stale_top()
        return self._live[self._heap[0][3]][0] if self._heap else None

    def pop(self, now: float) -> QueuedRequest | None:
        """Removes and returns the first request in policy order; None when empty."""
        self._drop_stale_top()
        if not self._heap:
            return None
        request_id = heapq.heappop(self._heap)[3]
        request, _ = self._live.pop(request_id)
        self._pop_times.append(now)
        self._forget_pops_before(now - self._drain_window_s)  # drain_rate is read only when the queue is full
        return request

    def remove(self, request_id: str) -> QueuedRequest | None:
        """Takes a waiting request out (cancelled or placed elsewhere); None when it is not waiting."""
        found = self._live.pop(request_id, None)
        self._compact_if_sparse()
        return found[0] if found else None

    def revise(self, request_id: str, **changes: Any) -> QueuedRequest:
        """Changes fields of a waiting request (its ``priority``, its application's rank) and re-orders it.

        Raises:
            KeyError: no request with that id is waiting.
        """
        request, _ = self._live[request_id]
        revised = replace(request, **changes)
        self._insert(revised)
        self._compact_if_sparse()
        return revised

    def ordered(self, now: float) -> list[QueuedRequest]:
        """Every waiting request in the order ``pop`` would return them (O(n log n); for inspection)."""
        entries = sorted(entry for _, entry in self._live.values())
        return [self._live[entry[3]][0] for entry in entries]

    def drain_rate(self, now: float) -> float:
        """Requests popped per second over the last ``drain_window_s`` seconds."""
        self._forget_pops_before(now - self._drain_window_s)
        return len(self._pop_times) / self._drain_window_s

    def _forget_pops_before(self, horizon: float) -> None:
        while self._pop_times and self._pop_times[0] < horizon:
            self._pop_times.popleft()

    def at_share(self, tenant: str, limit: int) -> bool:
        """Whether ``tenant`` holds its share of ``limit`` waiting requests: here, one queue, the whole limit."""
        return len(self) >= limit

    def retry_after_s(self, now: float) -> float:
        """Expected wait for one slot to free: one inter-pop gap at the recent drain rate."""
        return retry_after(self.drain_rate(now), self._max_retry_after_s)

    def _insert(self, request: QueuedRequest) -> None:
        entry: _Entry = (
            self.policy.rank(request),
            request.arrival_s,
            next(self._sequence),
            request.request_id,
        )
        self._live[request.request_id] = (request, entry)
        heapq.heappush(self._heap, entry)

    def _is_live(self, entry: _Entry) -> bool:
        found = self._live.get(entry[3])
        return found is not None and found[1] is entry

    def _drop_stale_top(self) -> None:
        while self._heap and not self._is_live(self._heap[0]):
            heapq.heappop(self._heap)

    def _compact_if_sparse(self) -> None:
        if len(self._heap) > 2 * len(self._live) + 64:
            self._heap = [entry for _, entry in self._live.values()]
            heapq.heapify(self._heap)
