"""Hot-prefix replication, E2's second post-assignment adjustment (Preble section 4.2).

When a prefix's load is "still too high even after the above rebalancing" (its holder is still the
heaviest worker past Th_bal) and its "average queueing time doubles over H" (the mean TTFT of the
requests that exploited it there, over the second half of the window, is at least twice the first
half's), the lightest other worker becomes a replica of the prefix for H. Replicas join the exploit
candidates, so the prefix's load splits between them by load cost.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence


class HotPrefixReplication:
    """Replicas of hot prefixes: prefix key -> replica worker -> since when."""

    def __init__(self, history_window_s: float) -> None:
        self.history_window_s = history_window_s
        self._replicas: dict[int, dict[str, float]] = {}

    def replicas_of(self, key: int) -> Sequence[str]:
        """Replica workers of the prefix ``key``, in the order they became replicas."""
        return list(self._replicas.get(key, {}))

    def record_ttft(self, samples: deque[tuple[float, float]], ttft_s: float, now: float) -> None:
        """Adds a TTFT of a prefix on its holder to ``samples``, keeping those within H."""
        samples.append((now, ttft_s))
        while samples[0][0] < now - self.history_window_s:
            samples.popleft()

    def doubled(self, samples: deque[tuple[float, float]], now: float) -> bool:
        """Whether the mean TTFT over the second half of H is at least twice the first half's."""
        middle = now - self.history_window_s / 2
        first = [v for t, v in samples if t < middle]
        second = [v for t, v in samples if t >= middle]
        return bool(first and second) and sum(second) / len(second) >= 2 * sum(first) / len(first)

    def replicate(
        self, key: int, holder: str, workers: Sequence[str], load: Callable[[str], float], now: float
    ) -> None:
        """Makes the least loaded worker other than ``holder`` and the current replicas a replica of ``key``."""
        replicas = self._replicas.setdefault(key, {})
        candidates = [w for w in workers if w != holder and w not in replicas]
        if candidates:
            replicas[min(candidates, key=load)] = now

    def forget_worker(self, worker_id: str) -> None:
        for replicas in self._replicas.values():
            replicas.pop(worker_id, None)

    def expire(self, horizon: float) -> None:
        """Drops the prefixes whose replicas all became replicas before ``horizon``."""
        for key in [k for k, r in self._replicas.items() if all(t < horizon for t in r.values())]:
            del self._replicas[key]
