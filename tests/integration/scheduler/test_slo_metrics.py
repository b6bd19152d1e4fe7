"""SLO attainment on the scheduler's /metrics: a real-time request's TTFT and TPOT objectives counted as
met or missed when it completes, a best-effort one not at all."""

from __future__ import annotations

from forethought.cluster.ports import free_port
from forethought.v1 import common_pb2

from tests.integration.scheduler.test_scheduler import adopted, metric, scheduler, stub_of, token_request, worker


def test_completed_requests_count_their_objectives_met_or_missed(start_service) -> None:
    worker(start_service, "w-slo", "10")
    port = free_port()
    front = scheduler(start_service, "--metrics-port", str(port))
    for stub in stub_of(front.address):
        adopted(stub, 1)
        realtime = token_request("rt-1", list(range(300, 340)), 8)
        realtime.service_class = common_pb2.SERVICE_CLASS_REAL_TIME
        realtime.slo.ttft_s = 60.0  # met: the first token comes in well under a minute
        realtime.slo.tpot_s = 1e-9  # missed: no token follows another within a nanosecond
        assert list(stub.Generate(realtime, timeout=30))[-1].usage.output_tokens == 8
        assert list(stub.Generate(token_request("be-1", list(range(400, 440)), 8), timeout=30))[-1].usage.output_tokens == 8
    counted = {(objective, outcome): metric(port, "forethought_slo_requests_total", objective=objective, outcome=outcome)
               for objective in ("ttft", "tpot") for outcome in ("met", "missed")}
    assert counted == {("ttft", "met"): 1, ("ttft", "missed"): 0, ("tpot", "met"): 0, ("tpot", "missed"): 1}
