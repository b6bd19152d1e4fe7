"""Bidirectional block manager: exact layouts, lazy checkpointing, and invariants under random operations."""

from __future__ import annotations

from forethought.domain import ServiceClass
from forethought.engine.block_manager import (
    BE_SIDE,
    RT_SIDE,
    SEALED,
    BidirectionalBlockManager,
    SealOutcome,
)
from forethought.engine.prefix_cache import PrefixCache
from hypothesis import given, settings
from hypothesis import strategies as st

RT, BE = ServiceClass.RT, ServiceClass.BE
BS = 8


def manager(num_blocks: int = 4, host_blocks: int = 4, bidirectional: bool = True) -> BidirectionalBlockManager:
    return BidirectionalBlockManager(num_blocks, BS, host_blocks, bidirectional, PrefixCache())


def layout(m: BidirectionalBlockManager) -> list[tuple[str | None, int, str | None, int]]:
    return [(b.owners[0], b.counts[0], b.owners[1], b.counts[1]) for b in map(m.block, range(m.num_blocks))]


def test_rt_fills_from_the_left_and_be_shares_the_right() -> None:
    m = manager(num_blocks=2)
    m.allocate("A", RT, 3)
    m.allocate("b", BE, 11)  # a whole free block, then the RT block's empty right side
    assert layout(m) == [("A", 3, "b", 3), (None, 0, "b", 8)]
    assert [(s.block_id, s.side, s.start, s.count) for s in m.segments("b")] == [(1, BE_SIDE, 0, 8), (0, BE_SIDE, 8, 3)]


def test_rt_preempts_the_be_block_with_most_empty_slots_and_checkpoints_lazily() -> None:
    m = manager(num_blocks=2, host_blocks=1)
    m.allocate("b", BE, 5)
    m.allocate("c", BE, 7)
    m.allocate("A", RT, 3)  # block 0 (b) has 3 empty slots, block 1 (c) only 1
    assert layout(m) == [("A", 3, "b", 5), (None, 0, "c", 7)]
    assert m.checkpointed_slots("b") == 0 and m.preemption_table == {}
    result = m.allocate("A", RT, 2)  # no empty slot left in A's block: overwrite b's two newest
    assert result.checkpointed == {"b": 2}
    assert layout(m) == [("A", 5, "b", 3), (None, 0, "c", 7)]
    assert m.host_ranges("b") == ((3, 2),)
    assert m.preemption_table[0].rt_request == "A" and m.preemption_table[0].overwritten_slots == 2


def test_checkpointed_slots_are_restored_before_the_request_grows() -> None:
    m = manager(num_blocks=2, host_blocks=1)
    m.allocate("b", BE, 8)
    m.allocate("A", RT, 8)  # free block 1
    m.allocate("A", RT, 3)  # overwrites b's positions 5..7
    assert m.host_ranges("b") == ((5, 3),)
    m.release("A")
    result = m.allocate("b", BE, 1)
    assert result.restored_slots == 3 and m.checkpointed_slots("b") == 0
    positions = sorted(p for s in m.segments("b") for p in range(s.start, s.end))
    assert positions == list(range(9))


def test_room_left_beside_a_restored_range_counts_for_new_tokens() -> None:
    m = manager(num_blocks=2, host_blocks=1)
    m.allocate("b", BE, 10)  # block 0 full, positions 8..9 on block 1's BE side
    m.allocate("A", RT, 6)  # the rest of block 1
    m.allocate("A", RT, 1)  # overwrites position 9
    m.release("A")
    assert m.host_ranges("b") == ((9, 1),) and m.free_capacity("b", BE) == 7
    assert m.allocate("b", BE, 1) is not None  # position 9 back beside 8, then 10 after it
    assert [(s.block_id, s.start, s.count) for s in m.segments("b")] == [(0, 0, 8), (1, 8, 3)]


def test_without_bidirectional_layout_classes_never_share_a_block() -> None:
    m = manager(num_blocks=2, bidirectional=False)
    m.allocate("b", BE, 3)
    assert not m.can_allocate("A", RT, 9)
    m.allocate("A", RT, 8)
    assert layout(m) == [(None, 0, "b", 3), ("A", 8, None, 0)]


def test_sealed_block_is_shared_and_evicted_only_when_unreferenced() -> None:
    cache = PrefixCache()
    m = BidirectionalBlockManager(2, BS, 0, True, cache)
    m.allocate("A", RT, 8)
    assert m.seal("A", 0, block_hash=11, parent_hash=0)
    assert m.acquire_cached("B", [11]) == 8
    m.release("A")
    assert cache.node(11).ref_count == 1 and cache.evictable_hashes() == ()
    m.release("B")
    assert cache.evictable_hashes() == (11,)
    assert m.allocate("C", BE, 16).evicted == [11]


def test_an_equal_cached_block_replaces_the_private_copy_and_sealing_needs_the_parent() -> None:
    cache = PrefixCache()
    m = BidirectionalBlockManager(4, BS, 0, True, cache)
    m.allocate("A", RT, 8)
    m.allocate("B", BE, 16)
    assert m.seal("A", 0, block_hash=11, parent_hash=0) is SealOutcome.STORED
    # B computed the same first block privately: it reads A's copy instead and its own block is freed.
    assert m.seal("B", 0, block_hash=11, parent_hash=0) is SealOutcome.SHARED
    assert [s.block_id for s in m.segments("B")] == [0, 2] and m.block(1).is_unused
    assert cache.node(11).ref_count == 2
    # C holds its first block privately under another hash, so it may not hang a child under 11.
    m.allocate("C", RT, 16)
    assert not m.seal("C", BS, block_hash=12, parent_hash=11)
    assert m.seal("B", BS, block_hash=12, parent_hash=11) is SealOutcome.STORED


def test_sealing_a_chain_in_one_pass_does_what_sealing_block_by_block_does() -> None:
    def prepared() -> BidirectionalBlockManager:
        m = manager(num_blocks=8)
        m.allocate("A", RT, 2 * BS)
        m.seal("A", 0, block_hash=11, parent_hash=0)
        m.seal("A", BS, block_hash=12, parent_hash=11)
        m.allocate("B", BE, 4 * BS + 3)  # the first two blocks equal A's, the last one partial
        return m

    hashes = (11, 12, 13, 14, 15)
    one_by_one, chained = prepared(), prepared()
    outcomes = []
    for index, block_hash in enumerate(hashes):
        parent = hashes[index - 1] if index else 0
        outcomes.append(one_by_one.seal("B", index * BS, block_hash, parent))
        if not outcomes[-1]:
            break
    assert outcomes == [SealOutcome.SHARED, SealOutcome.SHARED, SealOutcome.STORED, SealOutcome.STORED,
                        SealOutcome.REFUSED]  # the fifth block is partial
    assert chained.seal_chain("B", 0, hashes, 0) == outcomes
    assert layout(chained) == layout(one_by_one)
    assert chained.segments("B") == one_by_one.segments("B")
    assert chained.usage() == one_by_one.usage()
    assert chained.seal_chain("A", 2 * BS, (99,), 12) == [SealOutcome.REFUSED]  # A holds nothing there


# ---- invariants under random operation sequences ---------------------------------------------------

OPS = st.lists(
    st.tuples(st.sampled_from(["new", "grow", "release", "seal"]), st.integers(0, 7), st.integers(1, 20)),
    min_size=1,
    max_size=40,
)


def preemptible_capacity(m: BidirectionalBlockManager) -> int:
    """Slots a new RT request could get: whole blocks, plus BE-only blocks (overwrites bounded by host)."""
    whole = sum(1 for i in range(m.num_blocks) if m.block(i).is_unused) * BS
    whole += len(m._cache.evictable_hashes()) * BS if m._cache else 0
    be_only = [m.block(i) for i in range(m.num_blocks)
               if m.block(i).owners[RT_SIDE] is None and m.block(i).owners[BE_SIDE] is not None]
    empty = sum(b.empty_slots(BS) for b in be_only)
    return whole + empty + min(m.host_free_slots, sum(b.counts[BE_SIDE] for b in be_only))


def check_invariants(m: BidirectionalBlockManager, live: dict[str, ServiceClass]) -> None:
    owned: dict[tuple[int, int], str] = {}
    for request_id in live:
        positions: list[int] = []
        for segment in m.segments(request_id):
            positions.extend(range(segment.start, segment.end))
            block = m.block(segment.block_id)
            if segment.side == SEALED:
                assert block.sealed_hash is not None
                continue
            key = (segment.block_id, segment.side)
            assert key not in owned, f"slot side {key} owned twice"
            owned[key] = request_id
            assert block.owners[segment.side] == request_id and block.counts[segment.side] == segment.count
        for start, count in m.host_ranges(request_id):
            positions.extend(range(start, start + count))
        assert sorted(positions) == list(range(m.tokens_held(request_id))), "positions lost or doubled"
    for block_id in range(m.num_blocks):
        block = m.block(block_id)
        assert block.counts[0] + block.counts[1] <= BS
        for side in (RT_SIDE, BE_SIDE):
            assert (block.owners[side] is None) == (block.counts[side] == 0)
            if block.owners[side] is not None:
                assert owned[(block_id, side)] == block.owners[side]
    check_counters_match_a_scan(m)


def check_counters_match_a_scan(m: BidirectionalBlockManager) -> None:
    """The manager's running counters equal what a scan of every block finds."""
    blocks = [m.block(i) for i in range(m.num_blocks)]
    evictable = len(m._cache.evictable_hashes()) if m._cache else 0
    usage = m.usage()
    assert usage.rt_slots == sum(b.counts[RT_SIDE] for b in blocks)
    assert usage.be_slots == sum(b.counts[BE_SIDE] for b in blocks)
    assert usage.sealed_in_use_slots == (sum(b.sealed_hash is not None for b in blocks) - evictable) * BS
    assert usage.free_slots == sum(b.is_unused for b in blocks) * BS
    shareable = [b for b in blocks if b.sealed_hash is None and b.owners[RT_SIDE] and not b.owners[BE_SIDE]]
    whole = (usage.free_slots + usage.evictable_slots)
    assert m.free_capacity("newcomer", BE) == whole + sum(b.empty_slots(BS) for b in shareable)
    assert m.free_capacity("newcomer", RT) == preemptible_capacity(m)


@settings(max_examples=150, deadline=None)
@given(ops=OPS, host_blocks=st.integers(0, 3))
def test_invariants_hold_under_random_operations(ops: list[tuple[str, int, int]], host_blocks: int) -> None:
    m = manager(num_blocks=6, host_blocks=host_blocks)
    live: dict[str, ServiceClass] = {}
    names = 0
    for op, pick, amount in ops:
        ids = sorted(live)
        if op == "new":
            request_id, names = f"r{names}", names + 1
            service_class = RT if pick % 2 else BE
            if service_class == RT and amount <= preemptible_capacity(m):
                assert m.can_allocate(request_id, RT, amount), "BE-held memory was preemptible"
            if m.can_allocate(request_id, service_class, amount):
                m.allocate(request_id, service_class, amount)
                live[request_id] = service_class
        elif op == "grow" and ids:
            request_id = ids[pick % len(ids)]
            if m.can_allocate(request_id, live[request_id], amount):
                m.allocate(request_id, live[request_id], amount)
                assert m.checkpointed_slots(request_id) == 0, "checkpointed slots not restored"
        elif op == "release" and ids:
            request_id = ids[pick % len(ids)]
            m.release(request_id)
            del live[request_id]
        elif op == "seal" and ids:
            request_id = ids[pick % len(ids)]
            m.seal(request_id, 0, block_hash=1000 + names * 10 + pick, parent_hash=0)
        check_invariants(m, live)
    for request_id in list(live):
        m.release(request_id)
    usage = m.usage()
    assert usage.rt_slots == usage.be_slots == usage.sealed_in_use_slots == usage.host_slots == 0
    assert m.preemption_table == {}
    assert usage.free_slots + usage.evictable_slots == usage.total_slots
