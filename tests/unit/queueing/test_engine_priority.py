"""Engine priorities keep the global queue's order inside an engine, RT always before BE."""

from __future__ import annotations

from forethought.domain import ServiceClass
from forethought.queueing import QueuedRequest, build_policy, engine_priority
from forethought.queueing.policy import ENGINE_PRIORITY_BAND


def queued(request_id: str, predicted: float, service_class: ServiceClass, arrival_s: float = 100.0) -> QueuedRequest:
    return QueuedRequest(request_id, arrival_s, prompt_tokens=32, predicted_output_tokens=predicted, service_class=service_class)


def test_ssjf_priorities_order_by_predicted_length_within_a_class():
    policy = build_policy("ssjf", aging_rate=0.0)
    short, long_ = queued("s", 20, ServiceClass.BE), queued("l", 400, ServiceClass.BE)
    assert engine_priority(policy, short) < engine_priority(policy, long_)
    assert engine_priority(policy, long_) - engine_priority(policy, short) == 380


def test_every_real_time_request_ranks_above_every_best_effort_one():
    policy = build_policy("ssjf", aging_rate=0.0)
    slow_rt = engine_priority(policy, queued("rt", 10_000, ServiceClass.RT))
    fast_be = engine_priority(policy, queued("be", 1, ServiceClass.BE))
    assert slow_rt < ENGINE_PRIORITY_BAND <= fast_be


def test_fcfs_priorities_follow_arrival():
    policy = build_policy("fcfs")
    first = engine_priority(policy, queued("a", 5, ServiceClass.BE, arrival_s=10.0))
    second = engine_priority(policy, queued("b", 5, ServiceClass.BE, arrival_s=12.0))
    assert first < second
