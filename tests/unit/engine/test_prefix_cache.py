"""Prefix cache: radix nodes, reference counts and exact LRU eviction order."""

from __future__ import annotations

from forethought.domain import BlockRemoved, BlockStored
from forethought.domain.block_hashes import ROOT_PARENT, chained_block_hashes
from forethought.engine.prefix_cache import PrefixCache


def test_lru_evicts_least_recently_released_leaf_first() -> None:
    cache = PrefixCache()
    for block_id, (block_hash, parent) in enumerate([(1, 0), (2, 1), (3, 0)]):
        cache.insert(block_hash, parent, block_id)
    for block_hash in (2, 1, 3):  # a request releases its tail first
        cache.release(block_hash)
    assert cache.evictable_hashes() == (2, 1, 3)
    cache.acquire(2)  # touched again: 1 is now the parent of a referenced node, so 3 goes next
    evicted = [cache.evict_lru(), cache.evict_lru()]
    assert [node.block_hash if node else None for node in evicted] == [3, None]
    assert 1 in cache and 2 in cache


def test_eviction_never_takes_a_parent_before_its_children() -> None:
    cache = PrefixCache()
    cache.insert(1, 0, 0)
    cache.insert(2, 1, 1)
    cache.release(1)  # released out of order on purpose
    cache.release(2)
    evicted = [cache.evict_lru(), cache.evict_lru(), cache.evict_lru()]
    assert [node.block_hash if node else None for node in evicted] == [2, 1, None]


def test_engine_evicts_cached_blocks_in_lru_order(make_engine, make_request, run_until_idle) -> None:
    engine = make_engine(num_blocks=8, block_size=16, host_tier_blocks=0)
    prompt_a = tuple(range(100, 133))  # two full blocks + 1 token
    prompt_b = tuple(range(200, 233))
    hashes_a = chained_block_hashes(prompt_a, 16)
    hashes_b = chained_block_hashes(prompt_b, 16)
    engine.add_request(make_request("a", prompt=prompt_a, max_tokens=1), 0.0)
    run_until_idle(engine)
    engine.add_request(make_request("b", prompt=prompt_b, max_tokens=1), 1.0)
    run_until_idle(engine, now=1.0)
    assert engine.prefix_cache.evictable_hashes() == (hashes_a[1], hashes_a[0], hashes_b[1], hashes_b[0])
    # 8 blocks: 4 cached; a 5-block request must evict exactly one, the least recently used leaf.
    engine.add_request(make_request("c", prompt_len=70, max_tokens=10), 2.0)
    steps = run_until_idle(engine, now=2.0)
    removed = [h for _, out in steps for e in out.cache_events if isinstance(e, BlockRemoved) for h in e.block_hashes]
    assert removed == [hashes_a[1]]
    stored = [e for _, out in steps for e in out.cache_events if isinstance(e, BlockStored)]
    assert stored and stored[0].parent_hash == ROOT_PARENT


def _chain(cache: PrefixCache, hashes: list[int]) -> None:
    """Caches ``hashes`` as one prompt's chain (each under the one before), unreferenced."""
    for block_id, block_hash in enumerate(hashes):
        cache.insert(block_hash, hashes[block_id - 1] if block_id else ROOT_PARENT, block_id)
    cache.release_chain(list(reversed(hashes)))


def test_match_length_bisects_to_the_longest_cached_prefix() -> None:
    cache = PrefixCache()
    _chain(cache, [11, 12, 13, 14])
    cases = {(): 0, (11,): 1, (11, 12, 13, 14, 15): 4, (11, 12, 99): 2, (99, 11): 0}
    for hashes, expected in cases.items():
        assert cache.match_length(hashes) == expected == len(cache.match(hashes))
    assert cache.match_length((11, 12, 13, 14), limit=3) == 3
    evicted = cache.evict_lru()
    assert evicted is not None and evicted.block_hash == 14
    assert cache.match_length((11, 12, 13, 14)) == 3


def test_acquire_and_release_chain_keep_counts_and_lru_order_of_one_block_at_a_time() -> None:
    chained, single = PrefixCache(), PrefixCache()
    for cache in (chained, single):
        _chain(cache, [1, 2, 3])
        cache.insert(9, ROOT_PARENT, 9)
        cache.release(9)
    chained.acquire_chain([1, 2])
    for block_hash in (1, 2):
        single.acquire(block_hash)
    assert chained.evictable_hashes() == single.evictable_hashes() == (3, 9)
    chained.release_chain([2, 1])
    for block_hash in (2, 1):
        single.release(block_hash)
    assert chained.evictable_hashes() == single.evictable_hashes() == (3, 9, 2, 1)
    assert [chained.node(h).ref_count for h in (1, 2, 3)] == [0, 0, 0]
