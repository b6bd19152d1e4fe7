import math
import os

import pytest

from benchmarks import run_benchmark
from benchmarks.placement import _bucket_quantile, _share_within


def test_quantiles_interpolate_within_the_bucket_they_fall_in() -> None:
    buckets = [(0.001, 50.0), (0.002, 90.0), (0.004, 100.0), (math.inf, 100.0)]
    assert _bucket_quantile(buckets, 0.5) == 0.001
    assert math.isclose(_bucket_quantile(buckets, 0.7), 0.0015)
    assert math.isclose(_bucket_quantile(buckets, 0.99), 0.0038)
    assert _share_within(buckets, 0.002) == 0.9
    assert math.isnan(_bucket_quantile([(0.001, 0.0), (math.inf, 0.0)], 0.5))


def test_replicas_share_one_redis_and_report_their_decisions(tmp_path) -> None:
    status = run_benchmark("placement", [
        "--decisions", "40", "--batches", "1", "--routers", "e2", "--service-routers", "", "--replicas", "2",
        "--calls", "120", "--clients", "2", "--concurrency", "4", "--rate", "40", "--moderate-calls", "40", "--paced-clients", "2",
        "--out", str(tmp_path)])
    assert status == 0
    rows = [row.split("|")[1:-1] for row in (tmp_path / "table.md").read_text().splitlines() if row.startswith("| 2 |")]
    saturated, paced = rows  # the saturation row, then the fixed-rate row
    scheduler_ms, redis_ms = float(saturated[2]), float(saturated[4])
    assert scheduler_ms > 0 and redis_ms > 0  # both replicas and the shared Redis did the work
    decision_p50_ms, within_2ms = float(saturated[7]), float(saturated[9].strip(" %"))
    assert decision_p50_ms > 0 and 0 < within_2ms <= 100  # the schedulers' histograms counted the decisions
    paced_calls_per_s, paced_decision_p50_ms = float(paced[1]), float(paced[2])
    assert paced_calls_per_s > 0 and paced_decision_p50_ms > 0  # two client processes shared the fixed rate
    busy_cores = float(saturated[12]), float(paced[7])
    # The whole machine's CPU, read meanwhile; /proc/stat counts in 10 ms ticks, so a 1 s window may overshoot.
    assert all(0 < cores <= os.cpu_count() + 0.5 for cores in busy_cores)


def test_a_paced_client_count_below_one_is_refused_naming_the_flag(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        run_benchmark("placement", ["--paced-clients", "0", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert "argument --paced-clients: must be 1 or more, not 0" in capsys.readouterr().err


def test_one_scheduler_against_its_workers_at_saturation_and_at_a_rate_shared_by_paced_clients(tmp_path) -> None:
    status = run_benchmark("placement", [
        "--decisions", "40", "--batches", "1", "--routers", "e2", "--service-routers", "e2", "--replicas", "",
        "--calls", "120", "--clients", "2", "--concurrency", "4", "--rate", "40", "--moderate-calls", "60",
        "--paced-clients", "2", "--out", str(tmp_path)])
    assert status == 0
    table = (tmp_path / "table.md").read_text()
    rows = [row.split("|")[1:-1] for row in table.splitlines() if row.startswith("| e2 |")]
    relayed = next(row for row in rows if row[1].strip() == "scheduler -> worker")
    assert float(relayed[7]) > 0 and float(relayed[9].replace(",", "")) > 0  # the scheduler's CPU per call, and its inverse
    moderate = rows[-1]  # the fixed-rate row: each path's latency, side by side
    assert all(float(cell) > 0 for cell in moderate[1:5])
    assert "40 calls/s from 2 client processes, 60 calls" in table
