"""RequestOwners against a real redis-server: batched owner records and cancels forwarded between replicas."""

from __future__ import annotations

import asyncio

from forethought.services.scheduler.owners import RequestOwners
from redis.asyncio import Redis


async def test_records_are_written_and_deleted_at_the_flush(redis_client: Redis, namespace: str) -> None:
    owners = RequestOwners(redis_client, namespace)
    owners.hold("a")
    owners.hold("b")
    assert await redis_client.get(f"{namespace}:owner:a") is None  # not before the flush
    await owners.flush()
    assert await redis_client.get(f"{namespace}:owner:a") == owners.replica_id.encode()
    assert 0 < await redis_client.pttl(f"{namespace}:owner:b") <= 30_000
    owners.release("a")
    await owners.flush()
    assert await redis_client.get(f"{namespace}:owner:a") is None
    assert await redis_client.get(f"{namespace}:owner:b") == owners.replica_id.encode()


async def test_a_request_ended_before_the_flush_is_never_written(redis_client: Redis, namespace: str) -> None:
    owners = RequestOwners(redis_client, namespace)
    owners.hold("short")
    owners.release("short")
    await owners.flush()
    assert await redis_client.keys(f"{namespace}:owner:*") == []


async def test_a_cancel_reaches_the_replica_that_holds_the_request(redis_client: Redis, namespace: str) -> None:
    holder, other = RequestOwners(redis_client, namespace), RequestOwners(redis_client, namespace)
    cancelled: list[str] = []

    async def cancel_here(request_id: str) -> bool:
        cancelled.append(request_id)
        return True

    holder.hold("t/r1")
    await holder.flush()
    serving = asyncio.create_task(holder.serve_cancels(cancel_here))
    try:
        for _ in range(100):  # until the holder's subscription is live
            if await redis_client.pubsub_numsub(f"{namespace}:cancels:{holder.replica_id}") != [
                    (f"{namespace}:cancels:{holder.replica_id}".encode(), 0)]:
                break
            await asyncio.sleep(0.02)
        assert await other.forward_cancel("t/r1") is True
        assert await other.forward_cancel("t/unknown") is False
    finally:
        serving.cancel()
    assert cancelled == ["t/r1"]
