"""Queue orders: each policy orders exactly as its paper says, at every instant."""

from __future__ import annotations

import pytest
from forethought.domain import ServiceClass
from forethought.queueing import (
    POLICY_NAMES,
    QueuedRequest,
    build_policy,
    gittins_index,
)
from hypothesis import given, settings
from hypothesis import strategies as st

times = st.floats(min_value=0, max_value=1e4, allow_nan=False)
tokens = st.floats(min_value=1, max_value=4096, allow_nan=False)


def make_request(index: int, arrival: float, **fields: object) -> QueuedRequest:
    return QueuedRequest(request_id=f"r{index}", arrival_s=arrival, prompt_tokens=100, **fields)


def order(policy_name: str, requests: list[QueuedRequest], now: float, **options: object) -> list[str]:
    policy = build_policy(policy_name, **options)
    ranked = sorted(requests, key=lambda r: (policy.key(r, now), r.arrival_s, r.request_id))
    return [r.request_id for r in ranked]


@given(st.lists(times, min_size=1, max_size=30))
def test_fcfs_orders_by_arrival(arrivals: list[float]) -> None:
    requests = [make_request(i, t) for i, t in enumerate(arrivals)]
    expected = [r.request_id for r in sorted(requests, key=lambda r: (r.arrival_s, r.request_id))]
    assert order("fcfs", requests, now=max(arrivals)) == expected


@given(st.lists(st.tuples(times, tokens), min_size=1, max_size=30))
def test_ssjf_orders_by_predicted_output(items: list[tuple[float, float]]) -> None:
    requests = [make_request(i, t, predicted_output_tokens=p) for i, (t, p) in enumerate(items)]
    expected = sorted(requests, key=lambda r: (r.predicted_output_tokens, r.arrival_s, r.request_id))
    assert order("ssjf", requests, now=1e4) == [r.request_id for r in expected]


@given(st.lists(st.tuples(times, tokens, st.floats(0, 1e3)), min_size=1, max_size=30), times)
def test_lstf_orders_by_slack(items: list[tuple[float, float, float]], now: float) -> None:
    requests = [
        make_request(i, t, predicted_output_tokens=p, deadline_s=t + extra + 1)
        for i, (t, p, extra) in enumerate(items)
    ]
    policy = build_policy("lstf", seconds_per_output_token=0.01)
    slack = {r.request_id: r.deadline_s - now - r.predicted_output_tokens * 0.01 for r in requests}
    assert [policy.key(r, now)[-1] for r in requests] == pytest.approx([slack[r.request_id] for r in requests])
    ranked = order("lstf", requests, now, seconds_per_output_token=0.01)
    assert [slack[r] for r in ranked] == sorted(slack[r] for r in ranked)


@pytest.mark.parametrize("name", POLICY_NAMES)
@given(
    st.lists(st.tuples(times, tokens, st.sampled_from(list(ServiceClass))), min_size=2, max_size=20),
    st.floats(0, 5),
    times,
    times,
)
@settings(max_examples=40)
def test_rank_orders_like_key_at_every_instant(
    name: str, items: list[tuple[float, float, ServiceClass]], aging: float, now_a: float, now_b: float
) -> None:
    requests = [
        make_request(i, t, predicted_output_tokens=p, service_class=c, deadline_s=t + 50)
        for i, (t, p, c) in enumerate(items)
    ]
    policy = build_policy(name, aging_rate=aging)
    by_rank = sorted(requests, key=lambda r: (policy.rank(r), r.request_id))
    for now in (now_a, now_b):
        keys = [policy.key(r, now) for r in by_rank]
        for earlier, later in zip(keys, keys[1:]):
            assert earlier[:-1] < later[:-1] or (
                earlier[:-1] == later[:-1] and earlier[-1] <= later[-1] + 1e-6 * (1 + abs(later[-1]))
            )


def test_rtbe_serves_rt_by_ttft_slack_then_be_oldest_first() -> None:
    requests = [
        make_request(0, 0.0, service_class=ServiceClass.BE),
        make_request(1, 1.0, service_class=ServiceClass.RT, ttft_slo_s=2.0),  # deadline 3.0
        make_request(2, 1.5, service_class=ServiceClass.RT, ttft_slo_s=0.5),  # deadline 2.0
        make_request(3, 0.5, service_class=ServiceClass.BE),
        make_request(4, 1.8, service_class=ServiceClass.RT),  # BROS default 0.4 -> 2.2
    ]
    assert order("rtbe", requests, now=1.9) == ["r2", "r4", "r1", "r0", "r3"]
    assert build_policy("rtbe").key(requests[2], 1.9) == (0.0, 0.0, pytest.approx(0.1))


def test_gittins_prefers_a_job_likely_to_finish_soon_over_a_smaller_mean() -> None:
    risky = make_request(0, 0.0, predicted_quantiles=(1.0, 100.0))  # mean 50.5, rank 2
    steady = make_request(1, 0.0, predicted_quantiles=(10.0, 10.0), predicted_output_tokens=10.0)  # rank 10
    assert order("gittins", [steady, risky], now=0.0) == ["r0", "r1"]
    assert order("ssjf", [make_request(2, 0, predicted_output_tokens=50.5), steady], 0.0)[0] == "r1"


def test_gittins_orders_application_steps_by_their_run_rank_in_token_equivalents() -> None:
    short_run = make_request(0, 0.0, predicted_quantiles=(500.0, 900.0), application_rank=1.0)  # 50 tokens
    long_run = make_request(1, 0.0, predicted_quantiles=(1.0, 2.0), application_rank=8.0)  # 400 tokens
    lone = make_request(2, 0.0, predicted_output_tokens=100.0)
    assert order("gittins", [long_run, lone, short_run], now=0.0) == ["r0", "r2", "r1"]
    assert build_policy("gittins").key(short_run, 3.0) == (0.0, pytest.approx(50.0))
    # A rank of 0 (the run's demand all but attained) still counts: it is not "no rank".
    assert build_policy("gittins").key(make_request(3, 0.0, application_rank=0.0), 0.0) == (0.0, 0.0)


def test_lstf_takes_an_application_step_s_slack_from_its_run_s_remaining_demand() -> None:
    tight = make_request(0, 0.0, deadline_s=100.0, application_remaining_s=90.0, predicted_output_tokens=1.0)
    loose = make_request(1, 0.0, deadline_s=50.0, predicted_output_tokens=100.0)  # 2 s worst case: slack 48
    assert order("lstf", [loose, tight], now=0.0) == ["r0", "r1"]


@pytest.mark.parametrize(
    ("values", "probabilities", "attained", "expected"),
    [
        ([10.0], None, 0.0, 10.0),
        ([1.0, 100.0], None, 0.0, 2.0),
        ([1.0, 100.0], None, 1.0, 99.0),
        ([2.0, 4.0, 8.0], [0.5, 0.25, 0.25], 0.0, 4.0),
        ([5.0, 5.0, 20.0], None, 0.0, 7.5),
    ],
    ids=["point-mass", "two-point", "two-point-after-1", "weighted", "duplicate-support"],
)
def test_gittins_index_exact_values(
    values: list[float], probabilities: list[float] | None, attained: float, expected: float
) -> None:
    assert gittins_index(values, probabilities, attained) == pytest.approx(expected)


def test_gittins_index_rejects_a_finished_distribution() -> None:
    with pytest.raises(ValueError, match="no support point above attained=5"):
        gittins_index([1.0, 5.0], attained=5.0)


def test_build_policy_names_the_choices_on_a_typo() -> None:
    with pytest.raises(ValueError, match="choose one of fcfs, ssjf, gittins, lstf, rtbe"):
        build_policy("sjf")
    with pytest.raises(ValueError, match="bad options for queue policy 'fcfs'"):
        build_policy("fcfs", deadline=3)
    with pytest.raises(ValueError, match="aging_rate must be >= 0"):
        build_policy("ssjf", aging_rate=-1)
