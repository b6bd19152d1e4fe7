"""The queue orders of ``forethought bench ssjf``: each scheduler sorts by its own length."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.ssjf import Job, Scheduler, serve_static_batches


def one_at_a_time(jobs: Sequence[Job], sort_by: str) -> list[str]:
    """The order one server without batching finishes ``jobs`` in, all queued at once."""
    def duration(batch: Sequence[Job]) -> float:
        return sum(job.output_tokens for job in batch) / 100

    finish = serve_static_batches(jobs, Scheduler(sort_by, "ssjf", sort_by=sort_by), 1, 0.0, duration)
    return sorted(finish, key=finish.__getitem__)


def test_pair_mean_sjf_orders_by_the_mean_of_the_answers_not_by_the_forecast_or_the_answer_drawn() -> None:
    jobs = [Job("a", 0.0, 10, output_tokens=100, forecast_tokens=1.0, expected_tokens=50.0),
            Job("b", 0.0, 10, output_tokens=10, forecast_tokens=2.0, expected_tokens=500.0),
            Job("c", 0.0, 10, output_tokens=1000, forecast_tokens=3.0, expected_tokens=5.0)]
    assert one_at_a_time(jobs, "pair mean") == ["c", "a", "b"]
    assert one_at_a_time(jobs, "truth") == ["b", "a", "c"]
    assert one_at_a_time(jobs, "forecast") == ["a", "b", "c"]
