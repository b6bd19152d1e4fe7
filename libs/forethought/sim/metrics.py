"""Serving metrics of a replay (BROS section 7.1, Orca and vLLM's normalized latency, DistServe's SLOs).

Per request: job completion time (JCT), time to first token (TTFT), time per output token after the first
(TPOT) and normalized latency (JCT / output tokens). Per class (RT, BE, all): mean, p50, p95 and p99 of
each; SLO attainment for TTFT, TPOT and both; throughput in requests and output tokens per second; and the
prefix hit ratio (cached prompt tokens / prompt tokens); and the requests refused on arrival (``Refusal``: no
engine could ever hold them), counted apart from every other figure. Percentiles interpolate linearly between
ranks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from forethought.domain import ServiceClass


@dataclass(frozen=True)
class RequestRecord:
    """What one completed request did, in simulated (or wall-clock) seconds. SLOs of 0 mean none."""

    request_id: str
    service_class: ServiceClass
    arrival_s: float
    first_token_s: float
    finish_s: float
    prompt_tokens: int
    cached_prompt_tokens: int
    output_tokens: int
    ttft_slo_s: float = 0.0
    tpot_slo_s: float = 0.0

    @property
    def jct_s(self) -> float:
        return self.finish_s - self.arrival_s

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        """Mean gap between output tokens after the first; 0 for a single-token output."""
        if self.output_tokens <= 1:
            return 0.0
        return (self.finish_s - self.first_token_s) / (self.output_tokens - 1)

    @property
    def normalized_latency_s(self) -> float:
        return self.jct_s / max(1, self.output_tokens)

    @property
    def meets_ttft(self) -> bool:
        return self.ttft_slo_s <= 0 or self.ttft_s <= self.ttft_slo_s

    @property
    def meets_tpot(self) -> bool:
        return self.tpot_slo_s <= 0 or self.tpot_s <= self.tpot_slo_s


@dataclass(frozen=True)
class Refusal:
    """A request the cluster refused on arrival instead of serving, and why (it never ran)."""

    request_id: str
    service_class: ServiceClass
    arrival_s: float
    prompt_tokens: int
    max_tokens: int
    reason: str


@dataclass(frozen=True)
class Distribution:
    """Mean and tail percentiles of a sample (NaN when the sample is empty)."""

    count: int
    mean: float
    p50: float
    p95: float
    p99: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        if not values:
            return cls(0, math.nan, math.nan, math.nan, math.nan)
        array = np.asarray(values, dtype=float)
        p50, p95, p99 = np.percentile(array, [50, 95, 99]).tolist()
        return cls(len(values), float(array.mean()), p50, p95, p99)


@dataclass(frozen=True)
class ClassMetrics:
    """Metrics of one set of requests (one class, or all). Attainments are fractions in [0, 1].

    An attainment covers only the requests that carry that SLO; NaN when none does.
    """

    count: int
    jct_s: Distribution
    ttft_s: Distribution
    tpot_s: Distribution
    normalized_latency_s: Distribution
    ttft_attainment: float
    tpot_attainment: float
    slo_attainment: float
    requests_per_s: float
    output_tokens_per_s: float
    prefix_hit_ratio: float
    refused: int = 0
    """Requests of this set refused on arrival (not in ``count`` or any other figure)."""


@dataclass(frozen=True)
class MetricsReport:
    """Metrics of every completed request, and split by service class (classes with no request absent)."""

    overall: ClassMetrics
    by_class: dict[ServiceClass, ClassMetrics]

    def of(self, service_class: ServiceClass) -> ClassMetrics:
        """One class's metrics; an empty set of metrics when the class completed nothing."""
        return self.by_class.get(service_class) or summarize([], 1.0)


def summarize(records: Sequence[RequestRecord], duration_s: float, refused: int = 0) -> ClassMetrics:
    """Metrics of ``records`` (and ``refused``, the count of refused requests); throughputs divide by
    ``duration_s`` (the measured window)."""
    if duration_s <= 0:
        raise ValueError(f"duration_s must be positive, got {duration_s}")
    prompt_tokens = sum(record.prompt_tokens for record in records)
    return ClassMetrics(
        count=len(records),
        jct_s=Distribution.of([record.jct_s for record in records]),
        ttft_s=Distribution.of([record.ttft_s for record in records]),
        tpot_s=Distribution.of([record.tpot_s for record in records]),
        normalized_latency_s=Distribution.of([record.normalized_latency_s for record in records]),
        ttft_attainment=_attainment(records, ttft=True, tpot=False),
        tpot_attainment=_attainment(records, ttft=False, tpot=True),
        slo_attainment=_attainment(records, ttft=True, tpot=True),
        requests_per_s=len(records) / duration_s,
        output_tokens_per_s=sum(record.output_tokens for record in records) / duration_s,
        prefix_hit_ratio=(sum(record.cached_prompt_tokens for record in records) / prompt_tokens
                          if prompt_tokens else math.nan),
        refused=refused,
    )


def summarize_by_class(records: Iterable[RequestRecord], duration_s: float,
                       refusals: Iterable[Refusal] = ()) -> MetricsReport:
    """Metrics of all ``records`` and of each service class among them (or among ``refusals``)."""
    ordered = list(records)
    by_class: dict[ServiceClass, list[RequestRecord]] = {}
    for record in ordered:
        by_class.setdefault(record.service_class, []).append(record)
    refused: dict[ServiceClass, int] = {}
    for refusal in refusals:
        refused[refusal.service_class] = refused.get(refusal.service_class, 0) + 1
        by_class.setdefault(refusal.service_class, [])
    return MetricsReport(
        overall=summarize(ordered, duration_s, sum(refused.values())),
        by_class={cls: summarize(group, duration_s, refused.get(cls, 0)) for cls, group in sorted(by_class.items())},
    )


def _attainment(records: Sequence[RequestRecord], ttft: bool, tpot: bool) -> float:
    bound = [record for record in records
             if (ttft and record.ttft_slo_s > 0) or (tpot and record.tpot_slo_s > 0)]
    if not bound:
        return math.nan
    met = sum(1 for record in bound
              if (not ttft or record.meets_ttft) and (not tpot or record.meets_tpot))
    return met / len(bound)
