"""RedisPrefixIndex against a real redis-server: meaning, replicas, expiry, round trips."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from forethought.domain import AllBlocksCleared, BlockRemoved, BlockStored
from forethought.domain.block_hashes import chained_block_hashes
from forethought.prefix.memory_index import InMemoryPrefixIndex
from forethought.prefix.redis_index import RedisPrefixIndex
from redis.asyncio import Connection, ConnectionPool, Redis

BLOCK = 4


class ManualClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def stored(tokens: list[int]) -> BlockStored:
    return BlockStored(tuple(chained_block_hashes(tokens, BLOCK)), 0, tuple(tokens), BLOCK)


async def make_index(client: Redis, namespace: str, **options: Any) -> RedisPrefixIndex:
    index = RedisPrefixIndex(client, namespace=namespace, **options)
    await index.load_scripts()
    return index


async def test_matches_leading_blocks_like_the_in_memory_index(redis_client: Redis, namespace: str) -> None:
    index = await make_index(redis_client, namespace)
    reference = InMemoryPrefixIndex()
    rng = random.Random(7)
    prompts = [[rng.randrange(50) for _ in range(BLOCK * 6)] for _ in range(4)]
    shared = prompts[0][: BLOCK * 3]
    prompts.append(shared + prompts[1][: BLOCK * 3])
    for worker_id in ("w0", "w1", "w2"):
        await index.refresh_worker(worker_id, ttl_s=60)
    batches = [
        ("w0", [stored(prompts[0]), stored(prompts[4])]),
        ("w1", [stored(prompts[0][: BLOCK * 2]), stored(prompts[1])]),
        ("w2", [stored(prompts[2]), BlockRemoved(tuple(chained_block_hashes(prompts[2], BLOCK)[3:]))]),
        ("w1", [AllBlocksCleared(), stored(prompts[3])]),
    ]
    for worker_id, events in batches:
        await index.apply(worker_id, events)
        reference.apply(worker_id, events)
    for prompt in prompts:
        hashes = chained_block_hashes(prompt, BLOCK)
        assert await index.match(hashes) == reference.match(hashes)
    assert await index.match(chained_block_hashes(prompts[4], BLOCK)) == {"w0": 6}
    assert await index.match(chained_block_hashes(prompts[2], BLOCK)) == {"w2": 3}
    assert await index.match(chained_block_hashes(prompts[0], BLOCK)) == {"w0": 6}  # w1 cleared


async def test_two_replicas_share_one_index(redis_client: Redis, redis_port: int, namespace: str) -> None:
    other_client = Redis(host="127.0.0.1", port=redis_port, decode_responses=True)
    try:
        first = await make_index(redis_client, namespace)
        second = await make_index(other_client, namespace)
        hashes = chained_block_hashes(list(range(BLOCK * 5)), BLOCK)
        await first.refresh_worker("w0", ttl_s=60)
        await first.apply("w0", [stored(list(range(BLOCK * 5)))])
        assert await second.match(hashes) == {"w0": 5}
        await second.refresh_worker("w1", ttl_s=60)
        await second.apply("w1", [stored(list(range(BLOCK * 2)))])
        await second.apply("w0", [BlockRemoved((hashes[4],))])
        assert await first.match(hashes) == {"w0": 4, "w1": 2}
        await first.remove_worker("w0")
        assert await second.match(hashes) == {"w1": 2}
    finally:
        await other_client.aclose()


async def test_a_dead_worker_stops_matching_and_is_swept(redis_client: Redis, namespace: str) -> None:
    index = await make_index(redis_client, namespace)
    hashes = chained_block_hashes(list(range(BLOCK * 3)), BLOCK)
    await index.refresh_worker("dead", ttl_s=0.2)
    await index.refresh_worker("live", ttl_s=60)
    for worker_id in ("dead", "live"):
        await index.apply(worker_id, [stored(list(range(BLOCK * 3)))])
    assert await index.match(hashes) == {"dead": 3, "live": 3}
    await asyncio.sleep(0.4)  # the dead worker misses its heartbeat
    assert await index.match(hashes) == {"live": 3}
    assert set(await index.holders(hashes[0])) == {"live"}
    assert await index.sweep_dead_workers() == ["dead"]
    assert await redis_client.hkeys(f"{index.key_prefix}:blk:{hashes[0]}") == [b"live"]
    assert not await redis_client.exists(f"{index.key_prefix}:wblk:dead")


async def test_last_access_follows_the_injected_clock_and_lands_on_the_deepest_block_matched(
        redis_client: Redis, namespace: str) -> None:
    clock = ManualClock()
    index = await make_index(redis_client, namespace, clock=clock)
    tokens = list(range(BLOCK * 4))
    hashes = chained_block_hashes(tokens, BLOCK)
    await index.refresh_worker("w0", ttl_s=600)
    await index.apply("w0", [stored(tokens)])
    stored_at = clock.now
    assert await index.holders(hashes[3]) == {"w0": stored_at}
    clock.now += 5
    await index.match(hashes[:2])
    assert await index.holders(hashes[1]) == {"w0": clock.now}
    assert await index.holders(hashes[3]) == {"w0": stored_at}
    await index.match(hashes)
    assert await index.holders(hashes[3]) == {"w0": clock.now}
    # A match writes nothing else: the keys are the blocks, the worker's set, its heartbeat, the workers.
    kinds = {key.decode().split(":")[1] for key in await redis_client.keys(f"{index.key_prefix}:*")}
    assert kinds == {"blk", "wblk", "alive", "workers"}


class CountingConnection(Connection):
    """Counts writes to the socket: one per round trip, however many commands a pipeline packs."""

    sends = 0

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.sends += 1
        await super().send_packed_command(command, check_health)


async def test_matching_a_prompt_costs_at_most_two_round_trips(redis_port: int, namespace: str) -> None:
    pool = ConnectionPool(host="127.0.0.1", port=redis_port, connection_class=CountingConnection)
    client = Redis(connection_pool=pool)
    try:
        index = RedisPrefixIndex(client, namespace=namespace)
        tokens = list(range(BLOCK * 64))
        hashes = chained_block_hashes(tokens, BLOCK)
        for worker_id in ("w0", "w1", "w2", "w3"):
            await index.refresh_worker(worker_id, ttl_s=60)
            await index.apply(worker_id, [stored(tokens[: BLOCK * (16 * int(worker_id[1]) + 4)])])
        await client.script_flush()  # the worst case: the server lost the scripts
        CountingConnection.sends = 0
        assert await index.match(hashes) == {"w0": 4, "w1": 20, "w2": 36, "w3": 52}
        first_after_flush = CountingConnection.sends
        CountingConnection.sends = 0
        for _ in range(20):
            await index.match(hashes)
        assert CountingConnection.sends == 20
        assert first_after_flush <= 2 + 4  # NOSCRIPT, then reloading the four scripts, then the match
    finally:
        await client.aclose()
        await pool.disconnect()


async def test_matching_several_prompts_is_one_round_trip_with_the_same_answers(redis_port: int, namespace: str) -> None:
    pool = ConnectionPool(host="127.0.0.1", port=redis_port, connection_class=CountingConnection)
    client = Redis(connection_pool=pool)
    try:
        index = await make_index(client, namespace)
        shared, other = list(range(BLOCK * 8)), list(range(1000, 1000 + BLOCK * 8))
        for worker_id, blocks in (("w0", 8), ("w1", 3)):
            await index.refresh_worker(worker_id, ttl_s=60)
            await index.apply(worker_id, [stored(shared[: BLOCK * blocks])])
        prompts = [chained_block_hashes(shared, BLOCK), [], chained_block_hashes(other, BLOCK)]
        CountingConnection.sends = 0
        together = await index.match_many(prompts)
        assert CountingConnection.sends == 1
        assert together == [{"w0": 8, "w1": 3}, {}, {}]
        assert together == [await index.match(hashes) for hashes in prompts]
    finally:
        await client.aclose()
        await pool.disconnect()


async def test_a_long_prompt_matches_up_to_the_first_missing_block(redis_client: Redis, namespace: str) -> None:
    # 2,500 blocks: the script checks a worker's blocks 1,000 at a time; the gap lies in the second batch.
    index = await make_index(redis_client, namespace)
    tokens = list(range(BLOCK * 2500))
    hashes = chained_block_hashes(tokens, BLOCK)
    await index.refresh_worker("w0", ttl_s=60)
    await index.apply("w0", [stored(tokens[: BLOCK * 2200])])
    assert await index.match(hashes) == {"w0": 2200}
    await index.apply("w0", [BlockRemoved((hashes[1500],))])
    assert await index.match(hashes) == {"w0": 1500}
