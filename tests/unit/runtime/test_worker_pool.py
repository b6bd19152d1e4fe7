"""The scheduler's worker pool: who takes requests, and when a worker missing from the registry is given up."""

from __future__ import annotations

import socket

import grpc
import pytest
from forethought.cluster.ports import free_port
from forethought.cluster.registry import WorkerRecord
from forethought.services.scheduler.pool import WorkerPool
from grpc_health.v1 import health, health_pb2_grpc


def record(worker_id: str, address: str, state: str = "serving") -> WorkerRecord:
    return WorkerRecord(worker_id, address, "m", "sim", 8, state=state)


@pytest.fixture
async def pool():
    workers = WorkerPool(probe_timeout_s=0.3)
    yield workers
    await workers.close()


@pytest.fixture
async def answering():
    """The address of a live gRPC server with the health service (a worker that still runs)."""
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.fixture
def frozen():
    """The address of a socket that accepts connections and never answers (a stopped process)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


async def test_a_missing_worker_that_still_answers_keeps_its_channel_but_takes_nothing_new(pool, answering):
    assert await pool.refresh([record("w0", answering)]) == []
    assert await pool.refresh([]) == []  # Redis restarted empty, or the heartbeat is late
    assert pool.connected("w0")
    assert pool.stub("w0") is not None  # streams on it go on
    assert not pool.serves("m")
    assert await pool.refresh([record("w0", answering)]) == []
    assert pool.serves("m")


async def test_a_missing_worker_that_is_gone_is_given_up(pool):
    await pool.refresh([record("w0", f"127.0.0.1:{free_port()}")])  # nothing listens there any more
    assert await pool.refresh([]) == ["w0"]
    assert not pool.connected("w0")
    with pytest.raises(KeyError):
        pool.stub("w0")


async def test_a_missing_worker_that_is_frozen_is_given_up_after_the_probe_timeout(pool, frozen, answering):
    await pool.refresh([record("w0", frozen), record("w1", answering)])
    assert await pool.refresh([record("w1", answering)]) == ["w0"]
    assert pool.connected("w1") and not pool.connected("w0")


async def test_a_worker_restarted_under_a_new_id_at_the_same_address_replaces_the_old_one(pool, answering):
    # Without --worker-id a worker's id carries its pid: a restart lists a new id at the old address, where
    # the new process would answer the old id's health checks for good.
    await pool.refresh([record("host-50051-100", answering)])
    assert await pool.refresh([record("host-50051-200", answering)]) == ["host-50051-100"]
    assert pool.connected("host-50051-200") and not pool.connected("host-50051-100")


async def test_a_draining_worker_keeps_its_channel_but_serves_nothing_new(pool, answering):
    await pool.refresh([record("w0", answering)])
    assert await pool.refresh([record("w0", answering, state="draining")]) == []
    assert not pool.serves("m")
    assert pool.connected("w0")


async def test_a_worker_given_up_comes_back_with_a_new_channel(pool, answering):
    port = free_port()
    await pool.refresh([record("w0", f"127.0.0.1:{port}")])
    assert await pool.refresh([]) == ["w0"]
    assert await pool.refresh([record("w0", answering)]) == []
    assert pool.connected("w0") and pool.serves("m")
