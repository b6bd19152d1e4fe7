from collections.abc import Sequence

import pytest
from forethought.domain import ServiceClass
from forethought.workloads.workload import TokenSegment, TraceRequest


def make_request(request_id: str, arrival_s: float = 0.0, prompt: int = 64, output: int = 4,
                 service_class: ServiceClass = ServiceClass.RT,
                 segments: Sequence[TokenSegment] | None = None) -> TraceRequest:
    prompt_segments = tuple(segments) if segments is not None else (TokenSegment("t", hash(request_id) % 10**6, prompt),)
    return TraceRequest(request_id, arrival_s, prompt_segments, output, service_class,
                        ttft_slo_s=0.4 if service_class is ServiceClass.RT else 0.0,
                        tpot_slo_s=0.2 if service_class is ServiceClass.RT else 0.0)


@pytest.fixture(name="make_request")
def make_request_fixture():
    return make_request
