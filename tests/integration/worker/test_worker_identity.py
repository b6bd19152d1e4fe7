"""A worker id names one live worker: a second worker under it is refused (also one that started at the same
moment), a dead worker's entry is taken over, and a worker that lost its id while frozen stops."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import redis.asyncio as aioredis
from forethought.cluster.ports import free_port
from forethought.cluster.registry import WorkerRecord, WorkerRegistry

FAST_SIM = ("--engine", "sim", "--sim-speedup", "20")


async def entry_of(redis_url: str, namespace: str, worker_id: str) -> WorkerRecord | None:
    client = aioredis.from_url(redis_url)
    try:
        return await WorkerRegistry(client, namespace).entry(worker_id)
    finally:
        await client.aclose()


async def test_a_second_worker_under_a_live_workers_id_stops_at_start_and_leaves_its_entry(start_service, redis_server,
                                                                                              namespace):
    # Slow heartbeats: the first rewrites its entry seconds after the second leaves, not before this test reads it.
    first = start_service("worker", *FAST_SIM, "--worker-id", "w-same", "--heartbeat-s", "4", "--heartbeat-ttl-s", "10")
    started = time.monotonic()
    second = subprocess.run(
        [sys.executable, "-m", "forethought.cli", "serve", "worker", *FAST_SIM, "--worker-id", "w-same",
         "--redis-url", redis_server.url, "--namespace", namespace],
        capture_output=True, text=True, timeout=120,
    )
    waited = time.monotonic() - started
    assert second.returncode == 2
    assert second.stderr.endswith(
        "forethought worker: cannot start: invalid setting --worker-id / FORETHOUGHT_WORKER_ID = 'w-same': must be an id "
        f"no live worker holds: the worker at {first.address} heartbeats under it\n")
    assert waited < 30  # one heartbeat of the first (4 s) tells it apart from a dead worker's entry
    held = await entry_of(redis_server.url, namespace, "w-same")
    assert held is not None and held.address == first.address  # the refused start neither rewrote nor removed it


def wait_listening(port: int, process: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while process.poll() is None and time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"the worker on port {port} never listened (exit status {process.poll()})")


async def test_of_two_workers_starting_under_one_id_at_once_the_first_to_register_keeps_it(
        start_service, redis_server, namespace):
    # The slow one finds the id free as it starts listening, then loads its model for 8 s: the quick one starts,
    # finds the id free too, and registers first.
    port = free_port()
    slow = subprocess.Popen(
        [sys.executable, "-m", "forethought.cli", "serve", "worker", *FAST_SIM, "--sim-load-s", "8",
         "--worker-id", "w-twin", "--port", str(port), "--redis-url", redis_server.url, "--namespace", namespace],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_listening(port, slow)
        quick = start_service("worker", *FAST_SIM, "--worker-id", "w-twin")
        _, stderr = slow.communicate(timeout=60)
    finally:
        slow.kill()
    assert slow.returncode == 2
    assert stderr.endswith(
        "forethought worker: cannot start: invalid setting --worker-id / FORETHOUGHT_WORKER_ID = 'w-twin': must be an id "
        f"no live worker holds: the worker at {quick.address} registered under it while this one started\n")
    time.sleep(1.5)  # the quick one's next heartbeat finds its entry its own
    held = await entry_of(redis_server.url, namespace, "w-twin")
    assert held is not None and held.address == quick.address
    assert quick.process.poll() is None


async def test_a_dead_workers_entry_is_taken_over_once_its_heartbeat_stands_still(start_service, redis_server, namespace):
    client = aioredis.from_url(redis_server.url)
    try:  # a worker that heartbeat once and died: its entry lives out its TTL
        await WorkerRegistry(client, namespace, ttl_s=3.0).heartbeat(
            WorkerRecord(worker_id="w-reborn", address="127.0.0.1:1", model="m", engine="sim", capacity=8))
    finally:
        await client.aclose()
    worker = start_service("worker", *FAST_SIM, "--worker-id", "w-reborn")
    held = await entry_of(redis_server.url, namespace, "w-reborn")
    assert held is not None and held.address == worker.address


async def test_a_worker_whose_id_was_taken_while_it_was_frozen_stops_and_leaves_the_new_holder_alone(
        start_service, redis_server, namespace):
    import os
    import signal

    fast = ("--heartbeat-s", "0.5", "--heartbeat-ttl-s", "2")
    frozen = start_service("worker", *FAST_SIM, "--worker-id", "w-thawed", *fast)
    os.kill(frozen.process.pid, signal.SIGSTOP)
    try:
        taker = start_service("worker", *FAST_SIM, "--worker-id", "w-thawed", *fast)  # once the entry lapses (2 s)
    finally:
        os.kill(frozen.process.pid, signal.SIGCONT)
    assert frozen.process.wait(30) == 1
    assert "another worker took the id w-thawed while this one's registry entry had lapsed" in frozen.log()
    time.sleep(1.0)  # the taker's next heartbeats
    held = await entry_of(redis_server.url, namespace, "w-thawed")
    assert held is not None and held.address == taker.address
    assert taker.process.poll() is None
