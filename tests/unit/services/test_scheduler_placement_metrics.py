"""The placement loop's per-model metric series: a worker the pool gave up takes its series with it."""

from __future__ import annotations

from dataclasses import replace

from forethought.domain import GenerationRequest
from forethought.queueing import QueuedRequest
from forethought.scheduling import ScheduledRequest
from forethought.services.scheduler.placement import ModelSeries
from prometheus_client import REGISTRY


def placed_on(worker_id: str) -> ScheduledRequest:
    request = ScheduledRequest(QueuedRequest("r", 0.0, 32), "series-model", (1, 2), 16,
                               GenerationRequest("r", tuple(range(32)), 8))
    return replace(request, worker_id=worker_id)


def placements(worker_id: str, decision: str) -> float | None:
    return REGISTRY.get_sample_value("forethought_placements_total",
                                     {"model": "series-model", "worker": worker_id, "decision": decision})


def test_a_departed_worker_loses_its_placement_series_and_the_others_keep_theirs() -> None:
    series = ModelSeries("series-model")
    for worker_id, decision in (("old-id", "exploit"), ("old-id", "explore"), ("kept", "exploit")):
        series.count(placed_on(worker_id), decision, cached_blocks=1, now=1.0, decision_s=0.001)
    series.forget_worker("old-id")
    assert placements("old-id", "exploit") is None and placements("old-id", "explore") is None
    assert placements("kept", "exploit") == 1.0
    series.count(placed_on("old-id"), "exploit", cached_blocks=0, now=2.0, decision_s=0.001)  # back under that id
    assert placements("old-id", "exploit") == 1.0
