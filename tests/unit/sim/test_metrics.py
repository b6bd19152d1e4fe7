import math

import pytest
from forethought.domain import ServiceClass
from forethought.sim.metrics import (
    Distribution,
    RequestRecord,
    summarize,
    summarize_by_class,
)


def make_record(index: int, service_class: ServiceClass = ServiceClass.RT, *, arrival: float = 0.0,
                first: float = 0.5, finish: float = 2.5, output: int = 5, prompt: int = 100,
                cached: int = 0, ttft_slo: float = 0.4, tpot_slo: float = 0.2) -> RequestRecord:
    return RequestRecord(f"r{index}", service_class, arrival, first, finish, prompt, cached, output,
                         ttft_slo, tpot_slo)


def test_per_request_latencies() -> None:
    record = make_record(0, arrival=1.0, first=1.3, finish=3.3, output=5)
    assert record.jct_s == pytest.approx(2.3)
    assert record.ttft_s == pytest.approx(0.3)
    assert record.tpot_s == pytest.approx(0.5)
    assert record.normalized_latency_s == pytest.approx(0.46)
    assert (record.meets_ttft, record.meets_tpot) == (True, False)
    assert make_record(1, output=1).tpot_s == 0.0


def test_percentiles_interpolate_linearly_between_ranks() -> None:
    distribution = Distribution.of([float(v) for v in range(1, 101)])
    assert distribution == Distribution(100, 50.5, 50.5, 95.05, 99.01)
    small = Distribution.of([4.0, 1.0, 3.0, 2.0])
    assert (small.count, small.mean, small.p50) == (4, 2.5, 2.5)
    assert (small.p95, small.p99) == (pytest.approx(3.85), pytest.approx(3.97))
    empty = Distribution.of([])
    assert empty.count == 0 and math.isnan(empty.mean) and math.isnan(empty.p99)


def test_slo_attainment_counts_ttft_tpot_and_both() -> None:
    records = [
        make_record(0, first=0.3, finish=1.1, output=5),   # TTFT ok, TPOT 0.2 ok
        make_record(1, first=0.5, finish=1.3, output=5),   # TTFT missed, TPOT ok
        make_record(2, first=0.1, finish=2.1, output=5),   # TTFT ok, TPOT 0.5 missed
        make_record(3, first=0.9, finish=4.9, output=5),   # both missed
    ]
    metrics = summarize(records, duration_s=10.0)
    assert (metrics.ttft_attainment, metrics.tpot_attainment, metrics.slo_attainment) == (0.5, 0.5, 0.25)
    assert metrics.requests_per_s == pytest.approx(0.4)
    assert metrics.output_tokens_per_s == pytest.approx(2.0)
    assert metrics.jct_s.mean == pytest.approx((1.1 + 1.3 + 2.1 + 4.9) / 4)


def test_split_by_class_with_prefix_hits() -> None:
    records = [
        make_record(0, ServiceClass.RT, prompt=100, cached=50, output=10),
        make_record(1, ServiceClass.BE, prompt=300, cached=0, output=20, ttft_slo=0.0, tpot_slo=0.0),
        make_record(2, ServiceClass.BE, prompt=100, cached=100, output=30, ttft_slo=0.0, tpot_slo=0.0),
    ]
    report = summarize_by_class(records, duration_s=2.0)
    assert report.overall.count == 3
    assert report.overall.prefix_hit_ratio == pytest.approx(0.3)
    assert report.of(ServiceClass.RT).prefix_hit_ratio == 0.5
    be = report.of(ServiceClass.BE)
    assert (be.count, be.requests_per_s, be.output_tokens_per_s) == (2, 1.0, 25.0)
    assert math.isnan(be.ttft_attainment)  # BE requests carry no SLO


def test_a_class_with_no_requests_reports_zero_throughput() -> None:
    report = summarize_by_class([make_record(0)], duration_s=1.0)
    assert report.of(ServiceClass.BE).count == 0
    assert report.of(ServiceClass.BE).requests_per_s == 0.0
    with pytest.raises(ValueError, match="duration_s"):
        summarize([], 0.0)
