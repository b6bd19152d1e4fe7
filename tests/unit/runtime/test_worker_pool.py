"""The scheduler's worker pool: who takes requests, and when a worker missing from the registry is given up."""

from __future__ import annotations

import pytest

from forethought.cluster.registry import WorkerRecord
from forethought.services.scheduler.pool import WorkerPool

TTL_S = 5.0


def record(worker_id: str, heartbeat_s: float, state: str = "serving") -> WorkerRecord:
    # Nothing listens there: channels connect lazily, and these tests make no call.
    return WorkerRecord(worker_id, "127.0.0.1:9", "m", "sim", 8, state=state, heartbeat_s=heartbeat_s)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def pool(clock):
    workers = WorkerPool(TTL_S, clock)
    yield workers
    await workers.close()


async def test_a_worker_missing_from_the_registry_is_given_up_once_its_heartbeat_is_older_than_the_ttl(pool, clock):
    assert await pool.refresh([record("w0", 100.0), record("w1", 100.0)]) == []
    clock.now = 103.0  # w0 stopped heartbeating at 100; a Redis hiccup or its TTL is not over yet
    assert await pool.refresh([record("w1", 103.0)]) == []
    assert pool.connected("w0")
    assert pool.stub("w0") is not None  # streams on it go on
    clock.now = 105.5
    assert await pool.refresh([record("w1", 105.0)]) == ["w0"]
    assert not pool.connected("w0")
    with pytest.raises(KeyError):
        pool.stub("w0")
    assert pool.connected("w1")


async def test_an_empty_registry_read_cuts_nothing_while_heartbeats_are_recent(pool, clock):
    await pool.refresh([record("w0", 100.0)])
    clock.now = 101.0  # Redis restarted empty: nobody is listed until the next heartbeats
    assert await pool.refresh([]) == []
    assert not pool.serves("m")  # no new request goes to a worker the registry does not list
    assert pool.connected("w0")
    assert await pool.refresh([record("w0", 101.0)]) == []
    assert pool.serves("m")


async def test_a_draining_worker_keeps_its_channel_but_serves_nothing_new(pool):
    await pool.refresh([record("w0", 100.0)])
    assert await pool.refresh([record("w0", 100.0, state="draining")]) == []
    assert not pool.serves("m")
    assert pool.connected("w0")
    assert pool.records["w0"].state == "draining"


async def test_a_worker_given_up_comes_back_with_a_new_channel(pool, clock):
    await pool.refresh([record("w0", 100.0)])
    clock.now = 110.0
    assert await pool.refresh([]) == ["w0"]
    assert await pool.refresh([record("w0", 110.0)]) == []
    assert pool.connected("w0") and pool.serves("m")
