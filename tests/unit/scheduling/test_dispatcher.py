"""The dispatch state machine: room, queue order, placement, cancel, failover (Preble section 4.1-4.2)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from forethought.domain import ClassLoad, EngineStats, GenerationRequest, ServiceClass
from forethought.queueing import FairQueue, GlobalQueue, QueuedRequest, QueueFull, build_policy, engine_priority
from forethought.routing import build_router
from forethought.scheduling import (
    Dispatcher,
    PlacementStatus,
    ScheduledRequest,
    WorkerSlots,
    WorkerView,
)

BLOCK = 16


def make_request(rid: str, blocks: int = 4, prefix: int = 0, predicted: float = 0.0, arrival: float = 0.0) -> ScheduledRequest:
    hashes = tuple(prefix * 1000 + i for i in range(blocks))
    queued = QueuedRequest(rid, arrival, blocks * BLOCK, predicted_output_tokens=predicted)
    return ScheduledRequest(queued, "m", hashes, BLOCK, GenerationRequest(rid, tuple(range(blocks * BLOCK)), 8))


def views(*worker_ids: str, capacity: int = 64, **reported: int) -> dict[str, WorkerView]:
    return {
        w: WorkerView(w, capacity, EngineStats(be=ClassLoad(running=reported.get(w, 0))))
        for w in worker_ids
    }


def make_dispatcher(workers: tuple[str, ...] = ("w0", "w1"), router: str = "round_robin", policy: str = "fcfs",
                    max_waiting: int = 2, queue_capacity: int = 100, max_attempts: int = 3) -> Dispatcher:
    dispatcher = Dispatcher(build_router(router), GlobalQueue(build_policy(policy), queue_capacity),
                            WorkerSlots(max_waiting), max_attempts=max_attempts, quarantine_s=5.0)
    dispatcher.sync_workers(views(*workers), now=0.0)
    return dispatcher


def submit_all(dispatcher: Dispatcher, *requests: ScheduledRequest) -> None:
    for request in requests:
        dispatcher.submit(request, now=request.queued.arrival_s)


def place_all(dispatcher: Dispatcher, now: float = 1.0) -> list[tuple[str, str]]:
    placed = []
    for request in dispatcher.take(now):
        result = dispatcher.place(request.request_id, {}, now)
        assert result is not None
        placed.append((result.request_id, result.worker_id))
    return placed


def test_take_hands_out_only_as_many_requests_as_workers_have_room_for() -> None:
    dispatcher = make_dispatcher(max_waiting=2)
    submit_all(dispatcher, *(make_request(f"r{i}", arrival=i) for i in range(6)))
    assert place_all(dispatcher) == [("r0", "w0"), ("r1", "w1"), ("r2", "w0"), ("r3", "w1")]
    assert dispatcher.take(1.0) == []
    assert dispatcher.waiting == 2
    dispatcher.first_token("r0", now=2.0)  # r0 runs in w0's batch now: one slot frees
    assert [r.request_id for r in dispatcher.take(2.0)] == ["r4"]


def test_room_is_bounded_by_capacity_against_the_larger_of_own_and_reported_in_flight() -> None:
    slots = WorkerSlots(max_waiting_per_worker=4)
    slots.sync(views("w0", "w1", capacity=5, w1=4))
    assert (slots.room("w0"), slots.room("w1"), slots.free()) == (4, 1, 5)
    slots.dispatched("w0", "a")
    slots.started("w0", "a")
    assert slots.room("w0") == 4  # started requests leave the waiting bound, still count in flight
    for rid in "bcd":
        slots.dispatched("w0", rid)
    assert slots.room("w0") == 1  # capacity 5 - 4 in flight
    slots.released("w0", "a")
    assert (slots.unstarted("w0"), slots.in_flight("w0"), slots.room("w0")) == (3, 3, 1)


def real_time(rid: str, arrival: float = 0.0) -> ScheduledRequest:
    request = make_request(rid, arrival=arrival)
    request.queued = replace(request.queued, service_class=ServiceClass.RT, ttft_slo_s=1.0)
    return request


def test_real_time_requests_count_only_real_time_ones_against_room() -> None:
    slots = WorkerSlots(max_waiting_per_worker=2)
    slots.sync({"w0": WorkerView("w0", 3, EngineStats(rt=ClassLoad(running=1), be=ClassLoad(running=2)))})
    assert (slots.room("w0"), slots.room("w0", real_time=True)) == (0, 2)  # full of BE, room for 2 more RT
    slots.dispatched("w0", "rt-a", real_time=True)
    slots.dispatched("w0", "rt-b", real_time=True)
    assert slots.room("w0", real_time=True) == 0  # two unstarted RT fill the waiting bound
    slots.started("w0", "rt-a")
    slots.started("w0", "rt-b")
    assert slots.room("w0", real_time=True) == 1  # 3 - max(2 own, 1 reported) RT in flight
    slots.released("w0", "rt-a")
    slots.released("w0", "rt-b")
    assert slots.free(real_time=True) == 2


def test_a_worker_full_of_best_effort_requests_still_takes_real_time_ones_in_queue_order() -> None:
    dispatcher = Dispatcher(build_router("round_robin"), GlobalQueue(build_policy("rtbe"), 100), WorkerSlots(2))
    dispatcher.sync_workers({"w0": WorkerView("w0", 2)}, now=0.0)
    submit_all(dispatcher, make_request("be-0"), make_request("be-1"), make_request("be-2", arrival=0.5))
    assert [rid for rid, _ in place_all(dispatcher)] == ["be-0", "be-1"]
    for rid in ("be-0", "be-1"):
        dispatcher.first_token(rid, now=1.0)
    submit_all(dispatcher, real_time("rt-0", arrival=1.0), real_time("rt-1", arrival=1.1), real_time("rt-2", arrival=1.2))
    assert [rid for rid, _ in place_all(dispatcher, now=1.5)] == ["rt-0", "rt-1"]  # capacity 2 of RT, BE still waits
    assert dispatcher.take(1.5) == []
    dispatcher.finish("rt-0", now=2.0)
    assert [request.request_id for request in dispatcher.take(2.0)] == ["rt-2"]
    assert dispatcher.take(2.0) == []  # be-2 waits for a BE slot: 2 BE and 2 RT are in flight


@pytest.mark.parametrize(("policy", "expected"), [
    ("fcfs", ["long", "short", "medium"]),
    ("ssjf", ["short", "medium", "long"]),
])
def test_the_queue_policy_decides_who_is_placed_first(policy: str, expected: list[str]) -> None:
    dispatcher = make_dispatcher(("w0",), policy=policy, max_waiting=1)
    submit_all(dispatcher, make_request("long", predicted=900, arrival=0.0),
               make_request("short", predicted=10, arrival=0.1), make_request("medium", predicted=200, arrival=0.2))
    order = []
    for step in range(3):
        (taken,) = dispatcher.take(float(step))
        dispatcher.place(taken.request_id, {}, float(step))
        dispatcher.first_token(taken.request_id, float(step))
        order.append(taken.request_id)
    assert order == expected


def test_a_waiting_request_can_be_moved_ahead_by_a_new_priority() -> None:
    dispatcher = make_dispatcher(("w0",), max_waiting=1)
    submit_all(dispatcher, make_request("a", arrival=0.0), make_request("b", arrival=1.0))
    assert dispatcher.revise("b", priority=-1.0)
    assert dispatcher.requests["b"].queued.priority == -1.0
    assert not dispatcher.revise("unknown", priority=-1.0)
    assert [r.request_id for r in dispatcher.take(2.0)] == ["b"]
    dispatcher.place("b", {}, 2.0)
    assert not dispatcher.revise("b", priority=3.0)  # on its worker: the queue no longer orders it


def test_placement_exploits_the_worker_caching_the_prefix_and_ignores_unknown_workers() -> None:
    dispatcher = make_dispatcher(("w0", "w1", "w2"), router="e2", max_waiting=4)
    submit_all(dispatcher, make_request("r1", blocks=8, prefix=3))
    (taken,) = dispatcher.take(0.0)
    placed = dispatcher.place("r1", {"w2": 7, "gone": 8}, now=0.0)
    assert placed is not None and (placed.worker_id, placed.status, placed.attempts) == ("w2", PlacementStatus.DISPATCHED, 1)


def test_placement_decides_the_engine_priority_the_worker_is_sent() -> None:
    dispatcher = make_dispatcher(policy="ssjf")
    short, long = make_request("short", predicted=10.0), make_request("long", predicted=500.0)
    submit_all(dispatcher, long, short)
    place_all(dispatcher)
    sent = {request.request_id: request.worker_request() for request in (short, long)}
    assert sent["short"].priority < sent["long"].priority  # the global order, as the engine reads it
    assert sent["short"].priority == engine_priority(dispatcher.queue.policy, short.queued)
    assert replace(sent["long"], priority=0) == long.generation  # all else as submitted


def test_a_worker_is_sent_what_is_left_of_the_ttft_objective_after_the_wait_here() -> None:
    dispatcher = Dispatcher(build_router("round_robin"), GlobalQueue(build_policy("rtbe"), 100), WorkerSlots(4))
    dispatcher.sync_workers({"w0": WorkerView("w0", 4)}, now=0.0)
    on_time, late = real_time("on-time", arrival=10.0), real_time("late", arrival=10.0)
    for request in (on_time, late):
        request.generation = replace(request.generation, service_class=ServiceClass.RT, ttft_slo_s=1.0)
    submit_all(dispatcher, on_time, late, make_request("be"))
    dispatcher.take(10.25)
    sent = {rid: dispatcher.place(rid, {}, now).worker_request()
            for rid, now in (("on-time", 10.25), ("late", 11.5), ("be", 11.5))}
    assert sent["on-time"].ttft_slo_s == pytest.approx(0.75)  # a quarter second waited here
    assert sent["late"].ttft_slo_s == pytest.approx(0.001)  # used up: still set, so the most urgent
    assert sent["be"].ttft_slo_s == 0.0


def test_a_full_queue_refuses_with_a_retry_hint() -> None:
    dispatcher = make_dispatcher(queue_capacity=2)
    submit_all(dispatcher, make_request("a"), make_request("b"))
    with pytest.raises(QueueFull) as refused:
        dispatcher.submit(make_request("c"), now=0.0)
    assert refused.value.retry_after_s > 0
    assert "c" not in dispatcher.requests


def test_past_the_best_effort_limit_only_real_time_requests_are_admitted() -> None:
    dispatcher = Dispatcher(build_router("round_robin"), GlobalQueue(build_policy("rtbe"), 3), WorkerSlots(1),
                            best_effort_limit=1)
    real_time = make_request("rt")
    real_time.queued = replace(real_time.queued, service_class=ServiceClass.RT, ttft_slo_s=1.0)
    submit_all(dispatcher, make_request("be-1"), real_time)
    with pytest.raises(QueueFull) as refused:
        dispatcher.submit(make_request("be-2"), now=0.0)
    assert refused.value.capacity == 1 and refused.value.retry_after_s > 0
    second = make_request("rt-2")
    second.queued = replace(second.queued, service_class=ServiceClass.RT, ttft_slo_s=1.0)
    dispatcher.submit(second, now=0.0)  # up to the queue's capacity
    assert sorted(dispatcher.requests) == ["be-1", "rt", "rt-2"]


def test_a_flooding_tenant_at_the_best_effort_limit_does_not_shut_out_a_light_one() -> None:
    dispatcher = Dispatcher(build_router("round_robin"), FairQueue(build_policy("rtbe"), 100), WorkerSlots(1),
                            best_effort_limit=4)

    def of(rid: str, tenant: str) -> ScheduledRequest:
        request = make_request(rid)
        request.queued = replace(request.queued, tenant=tenant)
        return request

    submit_all(dispatcher, *(of(f"heavy-{i}", "heavy") for i in range(4)))
    with pytest.raises(QueueFull):
        dispatcher.submit(of("heavy-4", "heavy"), now=0.0)  # the limit, and heavy holds all of it
    submit_all(dispatcher, of("light-0", "light"), of("light-1", "light"))  # under its share of two tenants
    with pytest.raises(QueueFull):
        dispatcher.submit(of("light-2", "light"), now=0.0)
    assert sorted(dispatcher.requests) == ["heavy-0", "heavy-1", "heavy-2", "heavy-3", "light-0", "light-1"]


def test_a_live_request_id_cannot_be_submitted_twice() -> None:
    dispatcher = make_dispatcher()
    dispatcher.submit(make_request("a"), now=0.0)
    with pytest.raises(ValueError, match="already live"):
        dispatcher.submit(make_request("a"), now=0.0)


def test_cancel_removes_waiting_and_placing_requests_and_reports_running_ones() -> None:
    dispatcher = make_dispatcher(("w0",), max_waiting=1)
    submit_all(dispatcher, make_request("running"), make_request("waiting", arrival=1.0))
    (taken,) = dispatcher.take(0.0)
    assert dispatcher.cancel("running", 0.0) is taken  # being placed: withdrawn
    assert taken.status is PlacementStatus.CANCELLED
    assert dispatcher.place("running", {}, 0.0) is None
    (waiting,) = dispatcher.take(1.0)
    dispatcher.place("waiting", {}, 1.0)
    on_worker = dispatcher.cancel("waiting", 1.0)
    assert on_worker is not None and on_worker.status is PlacementStatus.DISPATCHED and on_worker.worker_id == "w0"
    assert "waiting" in dispatcher.requests  # stays live until its worker stream ends
    assert dispatcher.cancel("unknown", 1.0) is None


def test_cancelling_a_queued_request_takes_it_out_of_the_queue() -> None:
    dispatcher = make_dispatcher(("w0",), max_waiting=1)
    submit_all(dispatcher, make_request("a"), make_request("b", arrival=1.0))
    cancelled = dispatcher.cancel("a", 1.0)
    assert cancelled is not None and cancelled.status is PlacementStatus.CANCELLED
    assert [r.request_id for r in dispatcher.take(1.0)] == ["b"]


def test_a_worker_lost_before_the_first_token_retries_elsewhere_first_in_line() -> None:
    dispatcher = make_dispatcher(("w0", "w1"), max_waiting=1)
    submit_all(dispatcher, make_request("a"), make_request("b", arrival=1.0), make_request("c", arrival=2.0))
    assert place_all(dispatcher) == [("a", "w0"), ("b", "w1")]
    dispatcher.first_token("b", 1.5)
    decision = dispatcher.worker_lost("a", now=2.0)
    assert decision.retry and "before the first token" in decision.reason
    assert dispatcher.workers == ["w1"]
    assert [r.request_id for r in dispatcher.take(2.0)] == ["a"]  # ahead of c, which waited less
    placed = dispatcher.place("a", {"w0": 4}, 2.0)
    assert placed is not None and (placed.worker_id, placed.attempts) == ("w1", 2)


def test_a_lost_worker_stays_out_until_its_quarantine_ends() -> None:
    dispatcher = make_dispatcher(("w0", "w1"))
    submit_all(dispatcher, make_request("a"))
    place_all(dispatcher, now=1.0)
    dispatcher.worker_lost("a", now=1.0)
    dispatcher.sync_workers(views("w0", "w1"), now=3.0)  # the registry still lists w0
    assert dispatcher.workers == ["w1"]
    dispatcher.sync_workers(views("w0", "w1"), now=7.0)
    assert dispatcher.workers == ["w0", "w1"]


@pytest.mark.parametrize(("workers", "max_attempts", "started", "reason"), [
    (("w0", "w1"), 3, True, "after the first token"),
    (("w0", "w1"), 1, False, "attempts are used up"),
    (("w0",), 3, False, "no other worker"),
], ids=["streaming", "attempts", "last-worker"])
def test_a_worker_loss_that_cannot_be_hidden_fails_the_request(
    workers: tuple[str, ...], max_attempts: int, started: bool, reason: str
) -> None:
    dispatcher = make_dispatcher(workers, max_attempts=max_attempts)
    submit_all(dispatcher, make_request("a"))
    place_all(dispatcher)
    if started:
        dispatcher.first_token("a", 1.5)
    decision = dispatcher.worker_lost("a", now=2.0)
    assert not decision.retry and reason in decision.reason
    assert "a" not in dispatcher.requests


def test_waiting_requests_fail_when_the_last_worker_leaves() -> None:
    dispatcher = make_dispatcher(("w0",), max_waiting=1)
    submit_all(dispatcher, make_request("a"), make_request("b", arrival=1.0), make_request("c", arrival=2.0))
    place_all(dispatcher)
    orphans = dispatcher.sync_workers({}, now=3.0)
    assert [r.request_id for r in orphans] == ["b", "c"]
    assert all(r.status is PlacementStatus.FAILED for r in orphans)
    assert dispatcher.waiting == 0 and list(dispatcher.requests) == ["a"]


def test_finishing_frees_the_slot_and_feeds_the_router() -> None:
    dispatcher = make_dispatcher(("w0", "w1"), router="least_load", max_waiting=1)
    submit_all(dispatcher, make_request("a"), make_request("b"))
    assert place_all(dispatcher) == [("a", "w0"), ("b", "w1")]
    dispatcher.finish("a", now=2.0, output_tokens=10)
    assert dispatcher.slots.in_flight("w0") == 0 and "a" not in dispatcher.requests
    submit_all(dispatcher, make_request("c", arrival=2.0))
    assert place_all(dispatcher, now=2.0) == [("c", "w0")]  # least load: w1 still holds b


def test_load_snapshots_reach_the_router() -> None:
    dispatcher = make_dispatcher(("w0", "w1"), router="least_load", max_waiting=4)
    dispatcher.sync_workers(views("w0", "w1", w0=5), now=1.0)
    submit_all(dispatcher, make_request("a"))
    assert place_all(dispatcher) == [("a", "w1")]
