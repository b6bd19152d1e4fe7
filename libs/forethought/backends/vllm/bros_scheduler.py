"""BROS's hybrid RT/BE scheduling (section 4.2) inside vLLM, through its pluggable scheduler class.

vLLM's scheduler takes a request's ``priority`` (lower first) for its waiting heap and for choosing a
preemption victim. This subclass rewrites that priority every step so it means what BROS orders by:

- RT requests: the absolute deadline of their next token (TTFT before the first token, TPOT after),
  in milliseconds since the scheduler started. Ordering by deadline at one instant is ordering by
  remaining time to the deadline, BROS's RT order.
- BE requests: after every RT request (``BE_PRIORITY_BASE`` plus the caller's priority).

Each step it also applies the TCP-like adaptive batch size of ``forethought.engine.batch_size`` as
vLLM's admission cap, and, when an RT request waits while the batch is full, preempts the least
urgent running request (BE first) so the RT request runs this step: BROS's "RT first, then fill".
What stays out of reach without kernel changes (bidirectional blocks, lazy checkpointing) is in
``docs/vllm.md``. The SLOs travel in ``SamplingParams.extra_args`` (``slo_extra_args``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from forethought.domain import GenerationRequest, ServiceClass
from forethought.engine.batch_size import AdaptiveBatchSize
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.request import Request

BE_PRIORITY_BASE = 1 << 40
"""Every BE priority is above every RT deadline (2**40 ms is 34 years of scheduler uptime)."""
INITIAL_BATCH_SIZE = 4
_ITERATION_SMOOTHING = 0.2  # weight of the newest step in the moving-average iteration time
_RT_KEY = "forethought_rt"
_TTFT_KEY = "forethought_ttft_slo_s"
_TPOT_KEY = "forethought_tpot_slo_s"


@dataclass(frozen=True)
class SloTerms:
    """A request's class and SLOs as the scheduler reads them from ``extra_args``."""

    rt: bool
    ttft_slo_s: float = 0.0
    tpot_slo_s: float = 0.0
    base_priority: int = 0


def slo_extra_args(request: GenerationRequest) -> dict[str, Any]:
    """What ``VllmEngineBackend`` puts in ``SamplingParams.extra_args`` for this scheduler."""
    return {
        _RT_KEY: request.service_class == ServiceClass.RT,
        _TTFT_KEY: request.ttft_slo_s,
        _TPOT_KEY: request.tpot_slo_s,
    }


def read_terms(extra_args: dict[str, Any] | None, base_priority: int) -> SloTerms:
    """SloTerms from ``extra_args``; requests without them are BE."""
    args = extra_args or {}
    return SloTerms(
        bool(args.get(_RT_KEY, False)),
        float(args.get(_TTFT_KEY, 0.0)),
        float(args.get(_TPOT_KEY, 0.0)),
        base_priority,
    )


def next_token_deadline(terms: SloTerms, arrived_s: float, last_token_s: float | None) -> float:
    """When the next token is due: arrival + TTFT before the first token, last token + TPOT after."""
    if last_token_s is None:
        return arrived_s + terms.ttft_slo_s if terms.ttft_slo_s > 0 else math.inf
    return last_token_s + terms.tpot_slo_s if terms.tpot_slo_s > 0 else math.inf


def bros_priority(terms: SloTerms, deadline_s: float, epoch_s: float) -> int:
    """vLLM priority (lower first): RT by deadline in ms since ``epoch_s``, then BE by caller priority."""
    if not terms.rt:
        return BE_PRIORITY_BASE + terms.base_priority
    if math.isinf(deadline_s):
        # RT without a deadline: after every RT with one, still before all BE.
        return BE_PRIORITY_BASE - 1
    return max(0, int((deadline_s - epoch_s) * 1000))


class BrosVllmScheduler(Scheduler):
    """vLLM's scheduler with BROS's RT-by-deadline order, RT-first preemption and adaptive batch size."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._epoch = time.monotonic()
        maximum = self.max_num_running_reqs
        self._batch = AdaptiveBatchSize(initial=min(INITIAL_BATCH_SIZE, maximum), maximum=maximum)
        self._terms: dict[str, SloTerms] = {}
        self._arrived: dict[str, float] = {}
        self._last_token: dict[str, float] = {}
        self._iteration_s = 0.0
        self._step_started = 0.0

    def add_request(self, request: Request) -> None:
        now = time.monotonic()
        params = request.sampling_params
        terms = read_terms(params.extra_args if params is not None else None, request.priority)
        self._terms.setdefault(request.request_id, terms)
        self._arrived.setdefault(request.request_id, now)
        request.priority = self._priority(request.request_id)
        super().add_request(request)

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        now = time.monotonic()
        for request in self.running:
            request.priority = self._priority(request.request_id)
        residual = min((self._deadline(r.request_id) for r in self._rt_requests()), default=math.inf) - now
        self._batch.update(backed_off=residual < self._iteration_s)
        self.max_num_active_reqs = self._batch.current
        self._make_room_for_rt(now)
        self._step_started = now
        return super().schedule(*args, **kwargs)

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
        outputs = super().update_from_output(scheduler_output, model_runner_output)
        now = time.monotonic()
        if scheduler_output.total_num_scheduled_tokens:
            step = now - self._step_started
            self._iteration_s += _ITERATION_SMOOTHING * (step - self._iteration_s)
        for request_id in scheduler_output.num_scheduled_tokens:
            request = self.requests.get(request_id)
            if request is not None and request.num_output_tokens > 0:
                self._last_token[request_id] = now
        self._forget_finished()
        return outputs

    def _priority(self, request_id: str) -> int:
        terms = self._terms.get(request_id, SloTerms(False))
        return bros_priority(terms, self._deadline(request_id), self._epoch)

    def _deadline(self, request_id: str) -> float:
        terms = self._terms.get(request_id, SloTerms(False))
        arrived = self._arrived.get(request_id, self._epoch)
        return next_token_deadline(terms, arrived, self._last_token.get(request_id))

    def _rt_requests(self) -> list[Request]:
        return [r for r in (*self.running, *self.waiting) if self._is_rt(r)]

    def _is_rt(self, request: Request) -> bool:
        return self._terms.get(request.request_id, SloTerms(False)).rt

    def _make_room_for_rt(self, now: float) -> None:
        """Preempts the least urgent running requests while a more urgent RT request waits on a full batch."""
        urgent = sorted(r for r in self.waiting if self._is_rt(r))
        for waiting_rt in urgent:
            if len(self.running) < self.max_num_active_reqs:
                return
            victim = max(self.running, key=lambda r: (r.priority, r.arrival_time))
            if victim.priority <= waiting_rt.priority:
                return
            self.running.remove(victim)
            self._preempt_request(victim, now)

    def _forget_finished(self) -> None:
        for request_id in [rid for rid in self._terms if rid not in self.requests]:
            self._terms.pop(request_id, None)
            self._arrived.pop(request_id, None)
            self._last_token.pop(request_id, None)
