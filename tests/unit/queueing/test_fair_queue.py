"""FairQueue: the least-served tenant first (VTC), the policy's order within a tenant and its tiers across
tenants, no credit for idling."""

from __future__ import annotations

from dataclasses import replace

import pytest
from forethought.domain import ServiceClass
from forethought.queueing import FairQueue, QueuedRequest, QueueFull, build_policy


def make_request(request_id: str, tenant: str, predicted: float = 90.0, arrival: float = 0.0) -> QueuedRequest:
    return QueuedRequest(request_id=request_id, arrival_s=arrival, prompt_tokens=10, predicted_output_tokens=predicted,
                         tenant=tenant)


def drain(queue: FairQueue) -> list[str]:
    popped = []
    while (request := queue.pop(0.0)) is not None:
        popped.append(request.request_id)
    return popped


def test_a_flooding_tenant_takes_turns_with_a_light_one() -> None:
    queue = FairQueue(build_policy("fcfs"))
    for index in range(6):
        queue.push(make_request(f"a{index}", "a", arrival=index), 0.0)
    queue.push(make_request("b0", "b", arrival=10), 0.0)
    queue.push(make_request("b1", "b", arrival=11), 0.0)
    assert drain(queue) == ["a0", "b0", "a1", "b1", "a2", "a3", "a4", "a5"]
    assert queue.counters == {"a": 600.0, "b": 200.0}


def test_service_is_counted_in_tokens_not_requests() -> None:
    queue = FairQueue(build_policy("fcfs"))
    queue.push(make_request("big", "a", predicted=390.0, arrival=0), 0.0)  # 400 tokens
    queue.push(make_request("a-next", "a", predicted=90.0, arrival=1), 0.0)
    for index in range(4):
        queue.push(make_request(f"b{index}", "b", arrival=2 + index), 0.0)  # 100 tokens each
    assert drain(queue) == ["big", "b0", "b1", "b2", "b3", "a-next"]


def test_within_a_tenant_the_policy_orders() -> None:
    queue = FairQueue(build_policy("ssjf"))
    queue.push(make_request("long", "a", predicted=500.0), 0.0)
    queue.push(make_request("short", "a", predicted=5.0), 0.0)
    assert drain(queue) == ["short", "long"]


def test_a_real_time_request_never_waits_behind_a_less_served_tenants_best_effort_one() -> None:
    queue = FairQueue(build_policy("rtbe"))
    queue.push(make_request("heavy-be", "heavy", arrival=0), 0.0)
    queue.push(make_request("light-be", "light", arrival=1), 0.0)
    assert queue.pop(0.0).request_id == "heavy-be"  # heavy has received 100 tokens, light none
    queue.push(replace(make_request("heavy-rt", "heavy", arrival=2), service_class=ServiceClass.RT), 0.0)
    queue.push(make_request("heavy-be-2", "heavy", arrival=3), 0.0)
    assert queue.counters == {"heavy": 100.0, "light": 0.0}
    assert [request.request_id for request in queue.ordered(0.0)] == ["heavy-rt", "heavy-be-2", "light-be"]
    assert drain(queue) == ["heavy-rt", "light-be", "heavy-be-2"]  # the RT tier first, then fair among BE


def test_a_tenant_back_from_idling_earns_no_credit() -> None:
    queue = FairQueue(build_policy("fcfs"))
    for index in range(3):
        queue.push(make_request(f"a{index}", "a", arrival=index), 0.0)
    assert drain(queue) == ["a0", "a1", "a2"]  # a alone: counter 300
    queue.push(make_request("a3", "a", arrival=3), 0.0)
    queue.push(make_request("b0", "b", arrival=4), 0.0)  # b starts at a's 300, not 0
    queue.push(make_request("b1", "b", arrival=5), 0.0)
    assert queue.counters["b"] == 300.0
    assert drain(queue) == ["a3", "b0", "b1"]


def test_capacity_removal_and_revision_span_tenants() -> None:
    queue = FairQueue(build_policy("fcfs"), capacity=2)
    queue.push(make_request("a0", "a"), 0.0)
    queue.push(make_request("b0", "b"), 0.0)
    with pytest.raises(QueueFull):
        queue.push(make_request("c0", "c"), 0.0)
    with pytest.raises(ValueError, match="already queued"):
        queue.push(make_request("a0", "a"), 0.0)
    assert "b0" in queue and len(queue) == 2
    assert queue.remove("b0") is not None and queue.remove("b0") is None
    assert queue.revise("a0", priority=-1.0).priority == -1.0
    assert [request.request_id for request in queue.ordered(0.0)] == ["a0"]
    assert queue.peek(0.0) is not None and drain(queue) == ["a0"] and queue.peek(0.0) is None


def test_at_the_limit_only_tenants_holding_their_equal_share_are_at_it() -> None:
    queue = FairQueue(build_policy("fcfs"))
    for index in range(4):
        queue.push(make_request(f"a{index}", "a"), 0.0)
    assert not queue.at_share("a", 5)  # below the limit nobody is
    assert queue.at_share("a", 4)
    assert not queue.at_share("b", 4)  # b waits for nothing: its share of two tenants is 2
    queue.push(make_request("b0", "b"), 0.0)
    queue.push(make_request("b1", "b"), 0.0)
    assert queue.at_share("b", 4) and queue.at_share("a", 4)  # 2 and 4 of 4 with two tenants
    assert not queue.at_share("c", 4)  # a third tenant's share is 4/3
