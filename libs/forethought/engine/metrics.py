"""Per-iteration metrics, per-request outcomes and the windowed load the engine reports (BROS section 7
metrics; Preble section 4.2's load window feeds E2's load cost from ``EngineStats``)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from forethought.domain import FinishReason, ServiceClass, Usage


@dataclass(frozen=True)
class RequestOutcome:
    request_id: str
    service_class: ServiceClass
    finish_reason: FinishReason
    usage: Usage
    finished_s: float


@dataclass(frozen=True)
class IterationMetrics:
    """What one iteration ran and what it did to memory.

    ``*_prefill_tokens`` include chunks and recomputation; ``*_kv_slots`` are slots held after the
    iteration (sealed prefix blocks in use count once, under ``cached_kv_slots``).
    """

    batch_limit: int = 0
    rt_requests: int = 0
    be_requests: int = 0
    rt_prefill_tokens: int = 0
    be_prefill_tokens: int = 0
    rt_decode_tokens: int = 0
    be_decode_tokens: int = 0
    rt_kv_slots: int = 0
    be_kv_slots: int = 0
    cached_kv_slots: int = 0
    kv_usage: float = 0.0
    host_slots: int = 0
    preemptions: int = 0
    checkpointed_slots: int = 0
    restored_slots: int = 0
    prefix_hit_tokens: int = 0
    evicted_blocks: int = 0

    @property
    def batch_size(self) -> int:
        return self.rt_requests + self.be_requests


class LoadWindow:
    """Token rates and queueing delays over the last ``window_s`` seconds of engine time.

    Token sums over the window are kept as iterations enter and leave it, so a rate query costs no pass
    over the window (delays are few and summed afresh: a running float sum would drift).
    """

    def __init__(self, window_s: float) -> None:
        if window_s <= 0:
            raise ValueError("window_s must be positive")
        self.window_s = window_s
        self._iterations: deque[tuple[float, int, int]] = deque()
        self._delays: deque[tuple[float, float]] = deque()
        self._start: float | None = None
        self._prefill_sum = 0
        self._decode_sum = 0

    def record_iteration(self, start: float, end: float, prefill_tokens: int, decode_tokens: int) -> None:
        if self._start is None:
            self._start = start
        self._iterations.append((end, prefill_tokens, decode_tokens))
        self._prefill_sum += prefill_tokens
        self._decode_sum += decode_tokens
        self._trim(end)

    def record_queueing_delay(self, at: float, delay_s: float) -> None:
        self._delays.append((at, delay_s))

    def rates(self, now: float) -> tuple[float, float]:
        """(prefill, decode) tokens per second over the window ending at ``now``."""
        self._trim(now)
        if self._start is None:
            return 0.0, 0.0
        span = min(self.window_s, now - self._start)
        if span <= 0:
            return 0.0, 0.0
        return self._prefill_sum / span, self._decode_sum / span

    def mean_queueing_delay(self, now: float) -> float:
        self._trim(now)
        return sum(d for _, d in self._delays) / len(self._delays) if self._delays else 0.0

    def _trim(self, now: float) -> None:
        horizon = now - self.window_s
        while self._iterations and self._iterations[0][0] < horizon:
            _, prefill, decode = self._iterations.popleft()
            self._prefill_sum -= prefill
            self._decode_sum -= decode
        while self._delays and self._delays[0][0] < horizon:
            self._delays.popleft()
