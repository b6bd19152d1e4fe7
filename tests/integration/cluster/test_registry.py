"""The worker registry over a real Redis: one entry a reader cannot read leaves the others listed."""

from __future__ import annotations

import json
import logging

import pytest
from forethought.cluster.registry import WorkerRecord, WorkerRegistry, stats_to_json
from forethought.domain import EngineStats
from redis.asyncio import Redis


async def test_an_unreadable_entry_is_left_out_once_logged_and_the_others_stay_listed(
        redis_client: Redis, namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    registry = WorkerRegistry(redis_client, namespace, ttl_s=60)
    for worker_id in ("w0", "w1", "w2"):
        await registry.heartbeat(WorkerRecord(worker_id, f"127.0.0.1:{5000 + int(worker_id[1])}", "m", "sim", 8))
    await redis_client.hset(f"{namespace}:worker:w1", "capacity", "eight")  # a bad value
    # A newer worker's load with a field this version does not know (a rolling upgrade): still read.
    newer = json.loads(stats_to_json(EngineStats(total_kv_blocks=300)))
    newer["speculative_tokens"] = 12
    await redis_client.hset(f"{namespace}:worker:w2", "load", json.dumps(newer))
    with caplog.at_level(logging.WARNING, logger="forethought.cluster.registry"):
        first = await registry.workers()
        second = await registry.workers()
    assert [record.worker_id for record in first] == ["w0", "w2"] == [record.worker_id for record in second]
    assert first[1].load.total_kv_blocks == 300
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1 and warnings[0].startswith("worker w1: its registry entry cannot be read (ValueError")
    await registry.heartbeat(WorkerRecord("w1", "127.0.0.1:5001", "m", "sim", 8))  # its next heartbeat mends it
    assert [record.worker_id for record in await registry.workers()] == ["w0", "w1", "w2"]


async def test_one_entry_is_read_while_it_lives_and_is_none_once_gone_or_unreadable(redis_client: Redis, namespace: str) -> None:
    clock = iter([100.0, 101.5])
    registry = WorkerRegistry(redis_client, namespace, ttl_s=60, clock=lambda: next(clock))
    assert await registry.entry("w0") is None
    await registry.heartbeat(WorkerRecord("w0", "127.0.0.1:5000", "m", "sim", 8))
    assert await registry.entry("w0") == WorkerRecord("w0", "127.0.0.1:5000", "m", "sim", 8, heartbeat_s=100.0)
    await registry.heartbeat(WorkerRecord("w1", "127.0.0.1:5001", "m", "sim", 8))
    await redis_client.hset(f"{namespace}:worker:w1", "capacity", "eight")
    assert await registry.entry("w1") is None
    await registry.deregister("w0")
    assert await registry.entry("w0") is None


async def test_an_entry_is_changed_only_by_the_instance_that_wrote_it_or_one_taking_it_over(
        redis_client: Redis, namespace: str) -> None:
    first, second, third = (WorkerRegistry(redis_client, namespace, ttl_s=60, instance=name)
                            for name in ("first", "second", "third"))
    record = WorkerRecord("w0", "127.0.0.1:5000", "m", "sim", 8)
    moved = WorkerRecord("w0", "127.0.0.1:6000", "m", "sim", 8)
    assert await first.heartbeat(record) and await first.heartbeat(record)
    assert not await second.heartbeat(moved)
    assert not await second.deregister("w0")
    assert not await second.heartbeat(moved, taking_over="third")  # a take-over names the holder it replaces
    held = await second.holding("w0")
    assert held is not None and held.record.address == "127.0.0.1:5000" and held.instance == "first"
    assert await second.heartbeat(moved, taking_over=held.instance)
    assert not await third.heartbeat(record, taking_over=held.instance)  # the holder changed since it was read
    assert not await first.heartbeat(record)
    assert not await first.deregister("w0")
    assert (await first.entry("w0") or record).address == "127.0.0.1:6000"
    assert await second.deregister("w0")
    assert await first.entry("w0") is None and await first.workers() == []
    assert await first.heartbeat(record)  # a missing entry is anyone's
