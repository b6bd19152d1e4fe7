"""A worker's engine stats and prewarm tallies as Prometheus metrics, read when /metrics is scraped.

The engines already keep their load snapshot (``EngineStats``: running and waiting by service class, KV
use, prefix hit ratio, token rates) and the prewarm agent its tallies (``PrewarmMetrics``, Hermes 3.4);
a collector reads them at scrape time, so no loop copies them into gauges and a scrape is never stale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from forethought.domain import EngineStats, ServiceClass
from forethought.prewarm import PrewarmKind, PrewarmMetrics
from forethought.telemetry.metrics import SERVICE_CLASS_LABELS


@dataclass(frozen=True)
class WorkerReading:
    """One worker's numbers at one moment: its engines' stats by model and its prewarm tallies by kind."""

    worker_id: str
    engines: Mapping[str, EngineStats]
    prewarm: Mapping[PrewarmKind, PrewarmMetrics]


WorkerSource = Callable[[], WorkerReading]


def worker_metrics(readings: list[WorkerReading]) -> list[Metric]:
    """The metric families of ``readings`` (pure: the collector's whole output)."""
    running = GaugeMetricFamily("forethought_worker_running", "requests in the engine's running batch",
                                labels=["worker", "model", "service_class"])
    waiting = GaugeMetricFamily("forethought_worker_waiting", "requests admitted by the engine but not running",
                                labels=["worker", "model", "service_class"])
    kv_use = GaugeMetricFamily("forethought_worker_kv_cache_usage", "fraction of the engine's KV cache in use",
                               labels=["worker", "model"])
    hit_ratio = GaugeMetricFamily("forethought_worker_prefix_hit_ratio",
                                  "fraction of prompt tokens the engine served from its prefix cache",
                                  labels=["worker", "model"])
    tokens_per_s = GaugeMetricFamily("forethought_worker_tokens_per_second", "the engine's recent token rate, by phase",
                                     labels=["worker", "model", "phase"])
    prewarms = CounterMetricFamily("forethought_worker_prewarms_total",
                                   "prewarm outcomes since start, by kind: warmed, hit (used before its TTL), wasted "
                                   "(expired unused), unsupported, failed", labels=["worker", "kind", "outcome"])
    benefit_s = CounterMetricFamily("forethought_worker_prewarm_benefit_seconds_total",
                                    "warm-up seconds of prewarmed backends used before their TTL: time taken off the "
                                    "critical path (Hermes 3.4)", labels=["worker", "kind"])
    wasted_s = CounterMetricFamily("forethought_worker_prewarm_wasted_seconds_total",
                                   "idle seconds of prewarmed backends that expired unused", labels=["worker", "kind"])
    for reading in readings:
        worker = reading.worker_id
        for model, stats in reading.engines.items():
            for service_class, load in ((SERVICE_CLASS_LABELS[ServiceClass.RT], stats.rt),
                                        (SERVICE_CLASS_LABELS[ServiceClass.BE], stats.be)):
                running.add_metric([worker, model, service_class], load.running)
                waiting.add_metric([worker, model, service_class], load.waiting)
            kv_use.add_metric([worker, model], stats.kv_cache_usage)
            hit_ratio.add_metric([worker, model], stats.prefix_hit_ratio)
            tokens_per_s.add_metric([worker, model, "prefill"], stats.prefill_tokens_per_s)
            tokens_per_s.add_metric([worker, model, "decode"], stats.decode_tokens_per_s)
        for kind, tally in reading.prewarm.items():
            for outcome, count in (("warmed", tally.warmed), ("hit", tally.hits), ("wasted", tally.wasted),
                                   ("unsupported", tally.unsupported), ("failed", tally.failed)):
                prewarms.add_metric([worker, kind.value, outcome], count)
            benefit_s.add_metric([worker, kind.value], tally.benefit_s)
            wasted_s.add_metric([worker, kind.value], tally.wasted_idle_s)
    return [running, waiting, kv_use, hit_ratio, tokens_per_s, prewarms, benefit_s, wasted_s]


class WorkerStatsCollector(Collector):
    """Reads every registered worker at scrape time; one per process, since metric names are per registry
    (a benchmark may run several workers in one process)."""

    def __init__(self) -> None:
        self._sources: dict[int, WorkerSource] = {}

    def add(self, source: WorkerSource) -> int:
        """Starts reporting ``source``; returns the key that ``remove`` takes."""
        key = id(source)
        self._sources[key] = source
        return key

    def remove(self, key: int) -> None:
        self._sources.pop(key, None)

    def collect(self) -> Iterator[Metric]:
        yield from worker_metrics([source() for source in list(self._sources.values())])


WORKER_STATS = WorkerStatsCollector()
REGISTRY.register(WORKER_STATS)
