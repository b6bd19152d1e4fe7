"""Reading the services' Prometheus histograms from their ``/metrics`` pages, summed over processes, so a
benchmark can take the difference between two readings (what one run added)."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class HistogramReading:
    """A histogram's samples summed over the series read: observations, their sum, and the cumulative
    count at each bucket's upper bound (seconds)."""

    count: float = 0.0
    total: float = 0.0
    buckets: Mapping[float, float] = field(default_factory=dict)

    def __add__(self, other: HistogramReading) -> HistogramReading:
        return self._plus(other, 1.0)

    def __sub__(self, other: HistogramReading) -> HistogramReading:
        return self._plus(other, -1.0)

    def _plus(self, other: HistogramReading, sign: float) -> HistogramReading:
        bounds = self.buckets.keys() | other.buckets.keys()
        return HistogramReading(self.count + sign * other.count, self.total + sign * other.total,
                                {b: self.buckets.get(b, 0.0) + sign * other.buckets.get(b, 0.0) for b in bounds})


def read_histogram(ports: Iterable[int], name: str, **labels: str) -> HistogramReading:
    """Histogram ``name`` on the services at ``ports`` (loopback), over the series carrying ``labels``."""
    reading = HistogramReading()
    for port in ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        count = total = 0.0
        buckets: dict[float, float] = {}
        for family in text_string_to_metric_families(text):
            if family.name != name:
                continue
            for sample in family.samples:
                if not labels.items() <= sample.labels.items():
                    continue
                if sample.name.endswith("_bucket"):
                    bound = float(sample.labels["le"])
                    buckets[bound] = buckets.get(bound, 0.0) + sample.value
                elif sample.name.endswith("_count"):
                    count += sample.value
                elif sample.name.endswith("_sum"):
                    total += sample.value
        reading += HistogramReading(count, total, buckets)
    return reading
