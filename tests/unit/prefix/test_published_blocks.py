"""A worker's record of the blocks it published, rebuilt from its engine's cache events."""

from __future__ import annotations

from forethought.cluster.registry import WorkerRecord, with_recent_heartbeats
from forethought.domain.cache_events import AllBlocksCleared, BlockRemoved, BlockStored
from forethought.prefix.published_blocks import PublishedBlocks


def stored(*hashes: int) -> BlockStored:
    return BlockStored(block_hashes=hashes, parent_hash=0, token_ids=(), block_size=16)


def test_the_published_set_follows_stores_removals_and_clears_in_order():
    published = PublishedBlocks()
    published.apply([stored(1, 2, 3), BlockRemoved((2,)), stored(4, 2)])
    assert published.block_hashes() == (1, 3, 4, 2) and len(published) == 4
    published.apply([stored(1), BlockRemoved((9,))])  # a repeat store and an unknown removal change nothing
    assert published.block_hashes() == (1, 3, 4, 2)
    published.apply([AllBlocksCleared(), stored(7)])
    assert published.block_hashes() == (7,)


def record(worker_id: str, heartbeat_s: float) -> WorkerRecord:
    return WorkerRecord(worker_id, f"{worker_id}:1", "m", "sim", 8, heartbeat_s=heartbeat_s)


def test_a_worker_missing_from_the_registry_is_kept_while_its_last_heartbeat_is_fresh():
    known = {"a": record("a", 98.0), "b": record("b", 90.0), "c": record("c", 99.0)}
    listed = [record("c", 100.0), record("d", 100.0)]
    kept = with_recent_heartbeats(known, listed, now=100.0, ttl_s=5.0)
    # a: seen 2 s ago, kept; b: 10 s ago, gone; c and d: as listed now.
    assert [(r.worker_id, r.heartbeat_s) for r in kept] == [("a", 98.0), ("c", 100.0), ("d", 100.0)]
