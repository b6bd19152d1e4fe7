"""Load bookkeeping behind ``VllmEngineBackend.stats()`` (Preble E2 load cost, BROS class counts).

Pure and clock-injected: the backend feeds it request transitions and vLLM's per-iteration stats,
and asks for an ``EngineStats`` snapshot. Running/waiting per class come from our own bookkeeping
(a request waits until its first token arrives), since vLLM counts requests but not classes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from forethought.domain import ClassLoad, EngineStats, ServiceClass


@dataclass
class _Inflight:
    service_class: ServiceClass
    submitted_at: float
    first_token_at: float | None = None


class LoadMonitor:
    """In-flight requests by class plus recent engine rates over a sliding window.

    Args:
        clock: monotonic seconds.
        window_s: how far back token rates and the prefix hit ratio look.
        delay_samples: how many recent queueing delays the mean covers.
    """

    def __init__(
        self, clock: Callable[[], float], window_s: float = 10.0, delay_samples: int = 256
    ) -> None:
        self._clock = clock
        self._window_s = window_s
        self._inflight: dict[str, _Inflight] = {}
        self._iterations: deque[tuple[float, int, int, int, int]] = deque()
        self._delays: deque[float] = deque(maxlen=delay_samples)
        self.kv_cache_usage = 0.0
        self.total_kv_blocks = 0

    def submitted(self, request_id: str, service_class: ServiceClass) -> None:
        self._inflight[request_id] = _Inflight(service_class, self._clock())

    def first_token(self, request_id: str) -> None:
        entry = self._inflight.get(request_id)
        if entry is not None and entry.first_token_at is None:
            entry.first_token_at = self._clock()

    def finished(self, request_id: str) -> None:
        self._inflight.pop(request_id, None)

    def is_inflight(self, request_id: str) -> bool:
        return request_id in self._inflight

    def inflight_ids(self) -> list[str]:
        return list(self._inflight)

    def record_iteration(
        self, prefill_tokens: int, decode_tokens: int, cache_queries: int, cache_hits: int
    ) -> None:
        """One engine step's computed prompt tokens, generated tokens and prefix-cache lookups."""
        now = self._clock()
        self._iterations.append((now, prefill_tokens, decode_tokens, cache_queries, cache_hits))
        self._forget_before(now - self._window_s)

    def record_queueing_delay(self, seconds: float) -> None:
        self._delays.append(seconds)

    def snapshot(self, block_size: int) -> EngineStats:
        now = self._clock()
        self._forget_before(now - self._window_s)
        prefill = sum(it[1] for it in self._iterations)
        decode = sum(it[2] for it in self._iterations)
        queries = sum(it[3] for it in self._iterations)
        hits = sum(it[4] for it in self._iterations)
        return EngineStats(
            rt=self._class_load(ServiceClass.RT),
            be=self._class_load(ServiceClass.BE),
            kv_cache_usage=self.kv_cache_usage,
            prefill_tokens_per_s=prefill / self._window_s,
            decode_tokens_per_s=decode / self._window_s,
            mean_queueing_delay_s=sum(self._delays) / len(self._delays) if self._delays else 0.0,
            prefix_hit_ratio=hits / queries if queries else 0.0,
            total_kv_blocks=self.total_kv_blocks,
            block_size=block_size,
        )

    def _class_load(self, service_class: ServiceClass) -> ClassLoad:
        entries = [e for e in self._inflight.values() if e.service_class == service_class]
        running = sum(1 for e in entries if e.first_token_at is not None)
        return ClassLoad(running=running, waiting=len(entries) - running)

    def _forget_before(self, cutoff: float) -> None:
        while self._iterations and self._iterations[0][0] < cutoff:
            self._iterations.popleft()
