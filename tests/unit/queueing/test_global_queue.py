"""GlobalQueue: policy order, removal, priority updates, aging and admission control."""

from __future__ import annotations

import pytest
from forethought.queueing import GlobalQueue, QueuedRequest, QueueFull, build_policy
from hypothesis import given, settings
from hypothesis import strategies as st


def make_request(index: int, arrival: float, predicted: float = 100.0, **fields: object) -> QueuedRequest:
    return QueuedRequest(
        request_id=f"r{index}", arrival_s=arrival, prompt_tokens=10, predicted_output_tokens=predicted, **fields
    )


def drain(queue: GlobalQueue, now: float) -> list[str]:
    popped = []
    while (request := queue.pop(now)) is not None:
        popped.append(request.request_id)
    return popped


@given(
    st.lists(st.floats(1, 1000, allow_nan=False), min_size=1, max_size=60),
    st.sets(st.integers(0, 59)),
)
@settings(max_examples=60)
def test_pop_returns_ssjf_order_without_removed_requests(predictions: list[float], removed: set[int]) -> None:
    queue = GlobalQueue(build_policy("ssjf"))
    for index, predicted in enumerate(predictions):
        queue.push(make_request(index, float(index), predicted), now=float(index))
    for index in removed:
        assert (queue.remove(f"r{index}") is not None) == (index < len(predictions))
    expected = sorted(
        (p, i) for i, p in enumerate(predictions) if i not in removed
    )
    assert len(queue) == len(expected)
    assert drain(queue, 100.0) == [f"r{i}" for _, i in expected]


def test_revise_moves_a_request_to_the_front_and_back() -> None:
    queue = GlobalQueue(build_policy("fcfs"))
    for index in range(4):
        queue.push(make_request(index, float(index)), now=float(index))
    assert queue.revise("r3", priority=-1.0).priority == -1.0
    assert queue.peek(4.0).request_id == "r3"
    queue.revise("r0", priority=5.0)
    assert [r.request_id for r in queue.ordered(4.0)] == ["r3", "r1", "r2", "r0"]
    assert drain(queue, 4.0) == ["r3", "r1", "r2", "r0"]
    with pytest.raises(KeyError):
        queue.revise("r0", priority=1.0)


def test_aging_eventually_serves_an_old_long_request() -> None:
    queue = GlobalQueue(build_policy("ssjf", aging_rate=10.0))
    queue.push(make_request(0, 0.0, predicted=1000.0), now=0.0)
    served_at = None
    for step in range(1, 200):
        now = float(step)
        queue.push(make_request(step, now, predicted=10.0), now=now)
        if queue.pop(now).request_id == "r0":
            served_at = step
            break
    # r0's rank is 1000; a newcomer at t ranks 10 + 10 t, so r0 wins (older on a tie) at 10 + 10 t = 1000.
    assert served_at == 99


def test_without_aging_short_newcomers_starve_the_long_request() -> None:
    queue = GlobalQueue(build_policy("ssjf"))
    queue.push(make_request(0, 0.0, predicted=1000.0), now=0.0)
    for step in range(1, 200):
        queue.push(make_request(step, float(step), predicted=10.0), now=float(step))
        assert queue.pop(float(step)).request_id != "r0"


def test_full_queue_raises_with_a_retry_hint_from_the_drain_rate() -> None:
    queue = GlobalQueue(build_policy("fcfs"), capacity=3, drain_window_s=10.0, max_retry_after_s=5.0)
    for index in range(3):
        queue.push(make_request(index, 0.0), now=0.0)
    with pytest.raises(QueueFull) as refused:
        queue.push(make_request(9, 0.0), now=0.0)
    assert refused.value.retry_after_s == 5.0  # nothing drained yet: the cap
    assert refused.value.capacity == 3
    for second in (1.0, 2.0):  # two pops within the 10 s window: 0.2 per second
        queue.pop(second)
        queue.push(make_request(int(second) + 10, second), now=second)
    with pytest.raises(QueueFull, match=r"queue full \(3 waiting\); retry after 5.000 s"):
        queue.push(make_request(20, 3.0), now=3.0)
    queue.pop(4.0)
    queue.push(make_request(21, 4.0), now=4.0)
    with pytest.raises(QueueFull) as refused:
        queue.push(make_request(22, 4.0), now=4.0)
    assert refused.value.retry_after_s == pytest.approx(10.0 / 3.0)
    assert len(queue) == 3


def test_a_queue_that_never_fills_keeps_only_the_pops_within_the_drain_window() -> None:
    queue = GlobalQueue(build_policy("fcfs"), drain_window_s=10.0)
    for second in range(10_000):  # one request a second through a queue far from full
        queue.push(make_request(second, float(second)), now=float(second))
        queue.pop(float(second))
    assert len(queue._pop_times) == 11  # the pops at 9,989-9,999 s: a long-running scheduler's memory stays flat
    assert queue.drain_rate(9_999.0) == pytest.approx(1.1)


def test_duplicate_ids_are_refused() -> None:
    queue = GlobalQueue(build_policy("fcfs"))
    queue.push(make_request(0, 0.0), now=0.0)
    with pytest.raises(ValueError, match="'r0' is already queued"):
        queue.push(make_request(0, 1.0), now=1.0)


def test_many_updates_keep_the_heap_compact() -> None:
    queue = GlobalQueue(build_policy("fcfs"))
    for index in range(100):
        queue.push(make_request(index, float(index)), now=0.0)
    for value in range(1000):
        queue.revise(f"r{value % 100}", priority=float(value))
    assert len(queue._heap) <= 2 * len(queue) + 64
    assert drain(queue, 0.0)[:3] == ["r0", "r1", "r2"]  # priorities 900, 901, 902
