import numpy as np
import pytest
from forethought.domain import ServiceClass
from forethought.workloads.arrivals import (
    gamma_arrivals,
    poisson_arrivals,
    with_arrivals,
)
from forethought.workloads.workload import (
    ClosedLoopBatches,
    TokenSegment,
    TraceRequest,
    expand_segments,
)


def test_shorter_segment_of_a_stream_is_a_prefix_of_the_longer_one() -> None:
    long = TokenSegment("ns", 7, 64).token_ids()
    assert TokenSegment("ns", 7, 20).token_ids() == long[:20]
    assert TokenSegment("other", 7, 64).token_ids() != long
    assert TokenSegment("ns", 8, 64).token_ids() != long


def test_prompt_expands_segments_in_order() -> None:
    first, second = TokenSegment("a", 1, 5), TokenSegment("b", 2, 3)
    request = TraceRequest("r", 0.0, (first, second), output_tokens=4)
    assert request.prompt_tokens == 8
    assert request.prompt_token_ids() == tuple(first.token_ids() + second.token_ids())
    assert expand_segments(()) == ()


def test_closed_loop_batch_is_deterministic_and_within_the_inclusive_ranges() -> None:
    source = ClosedLoopBatches("be", batch_size=50, prompt_tokens=(512, 520), output_tokens=(32, 33), seed=3)
    batch = source.batch(2, submitted_s=9.5)
    assert batch == source.batch(2, submitted_s=9.5)
    assert batch != source.batch(3, submitted_s=9.5)
    assert [r.request_id for r in batch[:2]] == ["be-b2-0", "be-b2-1"]
    assert {r.prompt_tokens for r in batch} == set(range(512, 521))
    assert {r.output_tokens for r in batch} == {32, 33}
    assert all(r.arrival_s == 9.5 and r.service_class is ServiceClass.BE for r in batch)


@pytest.mark.parametrize("cv", [1.0, 3.0])
def test_gamma_arrivals_have_the_requested_rate_and_burstiness(cv: float) -> None:
    times = gamma_arrivals(4.0, cv, 40_000, np.random.default_rng(0), start_s=10.0)
    gaps = np.diff([10.0, *times])
    assert times == sorted(times) and times[0] > 10.0
    assert gaps.mean() == pytest.approx(0.25, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.08)


def test_poisson_arrivals_repeat_for_a_seed() -> None:
    assert poisson_arrivals(2.0, 5, np.random.default_rng(1)) == poisson_arrivals(2.0, 5, np.random.default_rng(1))
    with pytest.raises(ValueError, match="rate_per_s"):
        poisson_arrivals(0.0, 5, np.random.default_rng(1))


def test_with_arrivals_retimes_each_request() -> None:
    requests = [TraceRequest(f"r{i}", 0.0, (), 1) for i in range(2)]
    assert [r.arrival_s for r in with_arrivals(requests, [1.5, 2.5])] == [1.5, 2.5]
    with pytest.raises(ValueError, match="2 requests but 1 arrival"):
        with_arrivals(requests, [1.0])
