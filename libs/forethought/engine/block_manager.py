"""Bidirectional paged KV block manager (BROS section 5: block structure, FindBlock, FindPreemptBlock,
preemption table, lazy checkpointing).

A block of ``block_size`` slots is shared by at most one RT request, growing from the left, and one BE
request, growing from the right. Each request's slots in one block hold consecutive token positions::

      slot:   0    1    2    3    4    5    6    7
            +----+----+----+----+----+----+----+----+
            | A0 | A1 | A2 |    |    | b5 | b4 | b3 |     RT request A: positions 0..2 ->
            +----+----+----+----+----+----+----+----+     BE request b: positions 3..5 <-
              RT side (left) ->   empty   <- BE side (right)

When the empty middle is used up, RT request A may overwrite b's innermost slot (b5, b's newest token in
the block): that one slot is copied to the bounded host tier first (lazy checkpointing), the block enters
the preemption table, and b gets the slot back (into any free slots) before it runs again. BE never
overwrites RT. A block filled by one request's prompt block at an aligned position can be *sealed*: it
leaves both sides, joins the prefix cache and is shared read-only by reference count.

Allocation order (each step takes as many slots as the chosen block offers):
  * both classes: the request's own segment ending at the next position, if its block has empty slots;
    then a free block; then an evicted LRU cached block (whole blocks keep prompts aligned for sealing);
  * BE (FindBlock): the RT-owned block with the most empty slots whose BE side is free;
  * RT: overwrite the BE slots of its own tail block, then FindPreemptBlock: the BE-owned block whose RT
    side is free with the most empty slots.
``can_allocate`` never promises too much: for BE it replays the placement on counts (restores included),
for RT it counts only what the order above reaches for sure.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence

from forethought.domain import ServiceClass
from forethought.engine.kv_blocks import (
    BE_SIDE,
    RT_SIDE,
    SEALED,
    AllocationResult,
    CandidateBlocks,
    KVBlock,
    KVUsage,
    PreemptionEntry,
    SealOutcome,
    Segment,
    side_of,
)
from forethought.engine.prefix_cache import PrefixCache

# NOTE: looking up an enum member (``SealOutcome.STORED``) costs a descriptor call on Python 3.11,
# about ten times a global read; the per-request loops read these aliases instead.
_REFUSED, _SHARED, _STORED = SealOutcome.REFUSED, SealOutcome.SHARED, SealOutcome.STORED

__all__ = [
    "BE_SIDE", "RT_SIDE", "SEALED", "AllocationResult", "BidirectionalBlockManager", "KVBlock", "KVUsage",
    "PreemptionEntry", "SealOutcome", "Segment",
]  # the records live in kv_blocks; existing callers import them from here


class BidirectionalBlockManager:
    """Owns blocks, free list, host tier and preemption table; callers see slots and results only."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        host_tier_blocks: int,
        bidirectional: bool,
        prefix_cache: PrefixCache | None,
    ) -> None:
        self.block_size = block_size
        self.bidirectional = bidirectional
        self.host_capacity_slots = host_tier_blocks * block_size
        self._cache = prefix_cache
        self._blocks = [KVBlock(block_id) for block_id in range(num_blocks)]
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self._be_shareable = CandidateBlocks()
        self._rt_preemptible = CandidateBlocks()
        self._segments: dict[str, list[Segment]] = {}
        """Each request's private segments (an RT or BE side of a block), in the order it took them."""
        self._cached_prefix: dict[str, list[int]] = {}
        """Each request's sealed blocks by hash, which hold its positions ``[0, len * block_size)``: a request
        seals a block only under a parent it reads, so its sealed blocks are always a prefix of its chain."""
        self._host: dict[str, list[tuple[int, int]]] = {}
        self._host_used = 0
        self._preemption_table: dict[int, PreemptionEntry] = {}
        # Counters kept in step with every change, so no query scans blocks or segments.
        self._side_slots = [0, 0]
        self._num_sealed = 0
        self._gpu_tokens: dict[str, int] = {}
        self._host_tokens: dict[str, int] = {}

    # ---- queries -------------------------------------------------------------------------------------

    @property
    def num_blocks(self) -> int:
        return len(self._blocks)

    @property
    def preemption_table(self) -> Mapping[int, PreemptionEntry]:
        return dict(self._preemption_table)

    @property
    def host_free_slots(self) -> int:
        return self.host_capacity_slots - self._host_used

    def block(self, block_id: int) -> KVBlock:
        return self._blocks[block_id]

    def segments(self, request_id: str) -> tuple[Segment, ...]:
        """The request's segments: one per block of its cached prefix, then its private ones."""
        private = self._segments.get(request_id, [])
        prefix = self._cached_prefix.get(request_id)
        if not prefix:
            return tuple(private)
        assert self._cache is not None  # NOTE: only the prefix cache makes a cached prefix
        node, size = self._cache.node, self.block_size
        sealed = [Segment(node(block_hash).block_id, SEALED, index * size, size) for index, block_hash in enumerate(prefix)]
        return (*sealed, *private)

    def host_ranges(self, request_id: str) -> tuple[tuple[int, int], ...]:
        """Checkpointed ``(start, count)`` position ranges of the request on the host tier."""
        return tuple(self._host.get(request_id, ()))

    def checkpointed_slots(self, request_id: str) -> int:
        return self._host_tokens.get(request_id, 0)

    def tokens_held(self, request_id: str) -> int:
        return self._gpu_tokens.get(request_id, 0) + self._host_tokens.get(request_id, 0)

    def can_allocate(self, request_id: str, service_class: ServiceClass, num_tokens: int) -> bool:
        """Whether ``allocate`` would succeed: restore of checkpointed slots plus ``num_tokens`` new."""
        if request_id not in self._host_tokens and num_tokens <= self._tail_empty(request_id):
            return True  # the common decode step: the request's own tail block has room
        needed = self.checkpointed_slots(request_id) + num_tokens
        return needed <= self.free_capacity(request_id, service_class)

    def free_capacity(self, request_id: str, service_class: ServiceClass) -> int:
        """Slots ``allocate`` can hand this request now, restores included (a lower bound for RT)."""
        whole = (len(self._free) + (self._cache.num_evictable if self._cache else 0)) * self.block_size
        if service_class == ServiceClass.BE:
            return self._be_dry_run(request_id, whole // self.block_size)
        capacity = self._tail_empty(request_id) + whole
        if self.bidirectional:
            capacity += self._rt_preemptible.empty_slots
            capacity += min(self.host_free_slots, self._rt_preemptible.be_slots)
        return capacity

    def rt_capacity_dropping_be(self, request_id: str) -> int:
        """Slots an RT request could have once BE requests are dropped (BROS 5.2: "first BE"): its tail,
        whole and evictable blocks, and every BE-only block whole (dropping its BE owner frees it, whatever
        room the host tier has left for checkpoints). A lower bound: BE slots in RT-owned blocks and on the
        host tier are not counted."""
        whole = (len(self._free) + (self._cache.num_evictable if self._cache else 0)) * self.block_size
        preemptible = self._rt_preemptible.empty_slots + self._rt_preemptible.be_slots
        return self._tail_empty(request_id) + whole + preemptible

    def _be_dry_run(self, request_id: str, whole_blocks: int) -> int:
        """Replays BE placement on counts: checkpointed ranges first, then what is left for new tokens.

        Returns checkpointed + new slots available, or 0 when the restore itself cannot be placed.
        """
        shared_total = self._be_shareable.empty_slots if self.bidirectional else 0
        if request_id not in self._host:  # nothing to restore: the tail, whole blocks, shared blocks
            return self._tail_empty(request_id) + whole_blocks * self.block_size + shared_total
        shared = sorted(self._be_shareable.empty_counts(), reverse=True) if self.bidirectional else []
        room_after = {s.end: self._empty(s.block_id) for s in self._segments.get(request_id, ())}
        for start, count in self._host.get(request_id, ()):
            room_beside = room_after.pop(start, 0)
            beside = min(count, room_beside)
            position, left = start + beside, count - beside
            if beside:
                room_after[position] = room_beside - beside
            while left > 0:
                if whole_blocks:
                    whole_blocks, room = whole_blocks - 1, self.block_size
                elif shared:
                    room = shared.pop(0)
                else:
                    return 0
                taken = min(left, room)
                position, left = position + taken, left - taken
                room_after[position] = room - taken
        new_slots = room_after.get(self.tokens_held(request_id), 0) + whole_blocks * self.block_size + sum(shared)
        return self.checkpointed_slots(request_id) + new_slots

    def usage(self) -> KVUsage:
        evictable = self._cache.num_evictable if self._cache else 0
        sealed = self._num_sealed - evictable
        return KVUsage(
            rt_slots=self._side_slots[RT_SIDE],
            be_slots=self._side_slots[BE_SIDE],
            sealed_in_use_slots=sealed * self.block_size,
            evictable_slots=evictable * self.block_size,
            free_slots=len(self._free) * self.block_size,
            host_slots=self.host_capacity_slots - self.host_free_slots,
            total_slots=self.num_blocks * self.block_size,
        )

    # ---- commits -------------------------------------------------------------------------------------

    def acquire_cached(self, request_id: str, block_hashes: Sequence[int]) -> int:
        """Makes a request that holds nothing read the cached blocks of its prefix; returns tokens reused."""
        if self._cache is None or self._segments.get(request_id) or self._cached_prefix.get(request_id):
            return 0
        self._cache.acquire_chain(block_hashes)
        self._cached_prefix[request_id] = list(block_hashes)
        reused = len(block_hashes) * self.block_size
        self._add_gpu_tokens(request_id, reused)
        return reused

    def allocate(
        self, request_id: str, service_class: ServiceClass, num_tokens: int
    ) -> AllocationResult | None:
        """Restores the request's checkpointed slots, then gives it ``num_tokens`` new slots; None, with
        nothing changed, when ``can_allocate`` says they do not fit."""
        if self._extend_tail(request_id, num_tokens):
            return AllocationResult()
        if not self.can_allocate(request_id, service_class, num_tokens):
            return None
        result = AllocationResult()
        start = self.tokens_held(request_id)
        if request_id in self._host:
            self._restore(request_id, service_class, result)
        self._place(request_id, service_class, start, num_tokens, result)
        return result

    def seal(self, request_id: str, start: int, block_hash: int, parent_hash: int) -> SealOutcome:
        """Moves the full, privately held block at ``start`` (just past the request's cached prefix) into the
        prefix cache, or, when an equal block is cached already, frees the private copy and reads the cached
        one instead.

        NOTE: a request seals only under a parent it reads, so every reader of a node reads all its
        ancestors: an unreferenced node has only unreferenced descendants, and every block the cache counts
        as evictable can be evicted (leaves first) when ``free_capacity`` promised it.
        """
        return self.seal_chain(request_id, start, (block_hash,), parent_hash)[0]

    def seal_chain(
        self, request_id: str, start: int, block_hashes: Sequence[int], parent_hash: int
    ) -> list[SealOutcome]:
        """``seal`` of consecutive blocks from ``start``, each the parent of the next, up to and including the
        first refusal; their outcomes. One pass: after the first block the parent is the block just sealed,
        which the request now reads, so only the first parent is checked."""
        size, cache = self.block_size, self._cache
        prefix = self._cached_prefix.get(request_id, [])
        # the parent is read when it ends the cached prefix; a block inside the prefix is sealed already
        if cache is None or start != len(prefix) * size or (prefix and prefix[-1] != parent_hash):
            return [_REFUSED]
        segments = self._segments.get(request_id, [])
        blocks, side_slots, free, table = self._blocks, self._side_slots, self._free, self._preemption_table
        outcomes: list[SealOutcome] = []
        stored: list[int] = []
        sealed: list[Segment] = []
        for offset, block_hash in enumerate(block_hashes):
            position = start + offset * size
            # where it is when the private segments after the prefix are whole blocks: no scan
            segment = segments[offset] if offset < len(segments) else None
            if segment is None or segment.start != position or segment.count != size:
                segment = self._whole_block_at(segments, position)
            if segment is None:
                outcomes.append(_REFUSED)  # not a private whole block
                break
            block = blocks[segment.block_id]
            side = segment.side
            side_slots[side] -= block.counts[side]
            block.counts[side] = 0
            block.owners = [None, None]
            sealed.append(segment)
            if block_hash in cache:
                cache.acquire(block_hash)
                self._reindex(block)
                outcomes.append(_SHARED)
            else:
                block_id = block.block_id
                block.sealed_hash = block_hash
                table.pop(block_id, None)  # a sealed block leaves every index; the candidate sets after the loop
                free.pop(block_id, None)
                stored.append(block_id)
                cache.insert(block_hash, parent_hash, block_id)
                outcomes.append(_STORED)
            parent_hash = block_hash
        if sealed:
            self._cached_prefix.setdefault(request_id, prefix).extend(block_hashes[:len(sealed)])
            _remove_segments(segments, sealed)
        self._num_sealed += len(stored)
        self._be_shareable.discard_all(stored)
        self._rt_preemptible.discard_all(stored)
        return outcomes

    def release(self, request_id: str) -> None:
        """Frees every slot of the request; its sealed blocks stay cached, tail first in LRU order."""
        blocks = self._blocks
        for segment in reversed(self._segments.pop(request_id, [])):
            block = blocks[segment.block_id]
            block.owners[segment.side] = None
            self._set_count(block, segment.side, 0)
            self._reindex(block)
        prefix = self._cached_prefix.pop(request_id, None)
        if prefix:
            assert self._cache is not None  # NOTE: only the prefix cache makes a cached prefix
            self._cache.release_chain(prefix[::-1])  # tail first: the LRU end stays a leaf
        self._host_used -= self.checkpointed_slots(request_id)
        self._host.pop(request_id, None)
        self._gpu_tokens.pop(request_id, None)
        self._host_tokens.pop(request_id, None)

    # ---- placement -----------------------------------------------------------------------------------

    def _restore(self, request_id: str, service_class: ServiceClass, result: AllocationResult) -> None:
        """Places the request's checkpointed position ranges back on the GPU."""
        self._host_tokens.pop(request_id, None)
        for range_start, count in sorted(self._host.pop(request_id)):
            self._host_used -= count
            self._place(request_id, service_class, range_start, count, result)
            result.restored_slots += count

    def _place(
        self, request_id: str, service_class: ServiceClass, start: int, count: int, result: AllocationResult
    ) -> None:
        while count > 0:
            taken = (
                self._extend(request_id, start, count)
                or self._take_whole_block(request_id, service_class, start, count, result)
                or self._overwrite_tail(request_id, service_class, start, count, result)
                or self._take_shared_block(request_id, service_class, start, count, result)
            )
            if taken == 0:
                raise MemoryError(f"KV placement failed for {request_id}")  # can_allocate was True
            start += taken
            count -= taken

    def _extend_tail(self, request_id: str, num_tokens: int) -> bool:
        """The common decode step, without the general placement: when nothing is checkpointed and the
        request's newest segment ends at its next position with room for every token, it grows there
        (what ``_place`` would do first, as ``_segment_ending_at`` looks at the newest segment first)."""
        segments = self._segments.get(request_id)
        if not segments or request_id in self._host:
            return False
        tail = segments[-1]
        side = tail.side
        if tail.start + tail.count != self._gpu_tokens[request_id]:
            return False
        block = self._blocks[tail.block_id]
        counts = block.counts
        empty = self.block_size - counts[0] - counts[1] - num_tokens
        if empty < 0:
            return False
        tail.count += num_tokens
        self._gpu_tokens[request_id] += num_tokens
        counts[side] += num_tokens
        self._side_slots[side] += num_tokens
        self._recount(block, empty)
        return True

    def _extend(self, request_id: str, start: int, count: int) -> int:
        segment = self._segment_ending_at(request_id, start)
        if segment is None:
            return 0
        block = self._blocks[segment.block_id]
        taken = min(count, self._empty(segment.block_id))
        if taken == 0:
            return 0  # a full tail block (the usual case in a long prefill): nothing to update
        segment.count += taken
        self._add_gpu_tokens(request_id, taken)
        self._set_count(block, segment.side, block.counts[segment.side] + taken)
        self._recount(block, self._empty(block.block_id))
        return taken

    def _take_whole_block(
        self, request_id: str, service_class: ServiceClass, start: int, count: int, result: AllocationResult
    ) -> int:
        if count >= self.block_size:
            return self._fill_whole_blocks(request_id, side_of(service_class), start, count, result)
        block_id = self._unused_block(result)
        return 0 if block_id is None else self._open_side(request_id, service_class, block_id, start, count)

    def _unused_block(self, result: AllocationResult) -> int | None:
        """A free block, else the LRU cached block evicted (whole blocks keep prompts aligned for sealing)."""
        if self._free:
            return self._free.popitem(last=False)[0]
        if self._cache is None or (node := self._cache.evict_lru()) is None:
            return None
        self._blocks[node.block_id].sealed_hash = None
        self._num_sealed -= 1
        result.evicted.append(node.block_hash)
        return node.block_id

    def _fill_whole_blocks(
        self, request_id: str, side: int, start: int, count: int, result: AllocationResult
    ) -> int:
        """Fills unused blocks with ``count``'s whole blocks: what ``_open_side`` does block by block, in one
        pass (the bulk of a long prefill). A full block has no empty slots, so only a BE one joins a
        candidate set (FindPreemptBlock's)."""
        size, blocks, free, cache = self.block_size, self._blocks, self._free, self._cache
        wanted = count // size
        # free blocks first, then evicted LRU cached blocks, as _unused_block takes them
        block_ids = [free.popitem(last=False)[0] for _ in range(min(wanted, len(free)))]
        if len(block_ids) < wanted and cache is not None:
            evicted = cache.evict_lru_leaves(wanted - len(block_ids))
            for node in evicted:
                blocks[node.block_id].sealed_hash = None
                block_ids.append(node.block_id)
                result.evicted.append(node.block_hash)
            self._num_sealed -= len(evicted)
        for block_id in block_ids:
            block = blocks[block_id]
            block.owners[side] = request_id
            block.counts[side] = size
        self._segments.setdefault(request_id, []).extend(
            [Segment(block_id, side, start + index * size, size) for index, block_id in enumerate(block_ids)])
        if side == BE_SIDE:
            for block_id in block_ids:
                self._rt_preemptible.add(block_id, 0, size)
        taken = len(block_ids) * size
        self._side_slots[side] += taken
        self._add_gpu_tokens(request_id, taken)
        return taken

    def _take_shared_block(
        self, request_id: str, service_class: ServiceClass, start: int, count: int, result: AllocationResult
    ) -> int:
        """FindBlock for BE; FindPreemptBlock for RT (the BE block with the most empty slots)."""
        if not self.bidirectional:
            return 0
        candidates: Collection[int]
        if service_class == ServiceClass.BE:
            candidates = self._be_shareable
        else:
            candidates = self._rt_preemptible
            if self.host_free_slots == 0:
                candidates = {b for b in candidates if self._empty(b) > 0}
        if not candidates:
            return 0
        block_id = max(candidates, key=lambda b: (self._empty(b), -b))
        taken = self._open_side(request_id, service_class, block_id, start, count)
        if taken == 0:  # a full BE block: the RT request starts by overwriting
            taken = self._overwrite_tail(request_id, service_class, start, count, result)
        return taken

    def _overwrite_tail(
        self, request_id: str, service_class: ServiceClass, start: int, count: int, result: AllocationResult
    ) -> int:
        """Lazy checkpointing: RT takes its BE peer's innermost slots, copied to the host tier first."""
        segment = self._segment_ending_at(request_id, start)
        if not self.bidirectional or service_class != ServiceClass.RT or segment is None:
            return 0
        block = self._blocks[segment.block_id]
        victim = block.owners[BE_SIDE]
        taken = min(count, block.counts[BE_SIDE], self.host_free_slots)
        if victim is None or taken == 0:
            return 0
        victim_segment = next(s for s in self._segments[victim] if s.block_id == block.block_id)
        victim_segment.count -= taken
        self._add_gpu_tokens(victim, -taken)
        self._checkpoint(victim, victim_segment.end, taken)
        if victim_segment.count == 0:
            self._segments[victim].remove(victim_segment)
            block.owners[BE_SIDE] = None
        self._set_count(block, BE_SIDE, block.counts[BE_SIDE] - taken)
        self._set_count(block, RT_SIDE, block.counts[RT_SIDE] + taken)
        segment.count += taken
        self._add_gpu_tokens(request_id, taken)
        previous = self._preemption_table.get(block.block_id)
        overwritten = taken + (previous.overwritten_slots if previous else 0)
        self._preemption_table[block.block_id] = PreemptionEntry(request_id, victim, overwritten)
        result.checkpointed[victim] = result.checkpointed.get(victim, 0) + taken
        self._reindex(block)
        return taken

    def _open_side(
        self, request_id: str, service_class: ServiceClass, block_id: int, start: int, count: int
    ) -> int:
        block = self._blocks[block_id]
        side = side_of(service_class)
        taken = min(count, block.empty_slots(self.block_size))
        block.owners[side] = request_id
        self._set_count(block, side, taken)
        self._segments.setdefault(request_id, []).append(Segment(block_id, side, start, taken))
        self._add_gpu_tokens(request_id, taken)
        self._reindex(block)
        return taken

    # ---- bookkeeping ---------------------------------------------------------------------------------

    def _segment_ending_at(self, request_id: str, position: int) -> Segment | None:
        segments = self._segments.get(request_id)
        if not segments:
            return None
        last = segments[-1]
        if last.start + last.count == position:
            return last
        # Newest first: a side just opened for an overwrite must win over an older tail.
        for segment in reversed(segments):
            if segment.end == position:
                return segment
        return None

    def _whole_block_at(self, segments: Sequence[Segment], start: int) -> Segment | None:
        """The segment of ``segments`` at ``start`` that holds a whole block, if any."""
        size = self.block_size
        for segment in segments:
            if segment.start == start and segment.count == size:
                return segment
        return None

    def _checkpoint(self, request_id: str, start: int, count: int) -> None:
        """Records positions copied to the host tier, merging adjacent ranges."""
        merged = [start, start + count]
        kept = []
        for range_start, range_count in self._host.get(request_id, []):
            range_end = range_start + range_count
            if range_end == merged[0] or range_start == merged[1]:
                merged = [min(merged[0], range_start), max(merged[1], range_end)]
            else:
                kept.append((range_start, range_count))
        kept.append((merged[0], merged[1] - merged[0]))
        self._host[request_id] = sorted(kept)
        self._host_used += count
        self._host_tokens[request_id] = self._host_tokens.get(request_id, 0) + count

    def _set_count(self, block: KVBlock, side: int, count: int) -> None:
        self._side_slots[side] += count - block.counts[side]
        block.counts[side] = count

    def _add_gpu_tokens(self, request_id: str, delta: int) -> None:
        self._gpu_tokens[request_id] = self._gpu_tokens.get(request_id, 0) + delta

    def _tail_empty(self, request_id: str) -> int:
        segment = self._segment_ending_at(request_id, self.tokens_held(request_id))
        return self._empty(segment.block_id) if segment else 0

    def _empty(self, block_id: int) -> int:
        return self._blocks[block_id].empty_slots(self.block_size)

    def _recount(self, block: KVBlock, empty: int) -> None:
        """``_reindex`` after a side grew and kept its owner, now with ``empty`` empty slots: only the
        candidate sums can change (a block only leaves FindBlock's set when its last empty slot goes), the
        free list and table cannot."""
        block_id = block.block_id
        if block_id in self._be_shareable:
            if empty > 0:
                self._be_shareable.add(block_id, empty, 0)
            else:
                self._be_shareable.discard(block_id)
        elif block_id in self._rt_preemptible:
            self._rt_preemptible.add(block_id, empty, block.counts[BE_SIDE])

    def _reindex(self, block: KVBlock) -> None:
        """Keeps the free list, the FindBlock/FindPreemptBlock candidate sets and the table in step."""
        block_id = block.block_id
        rt_owner, be_owner = block.owners
        rt_slots, be_slots = block.counts
        if (rt_owner is None and rt_slots) or (be_owner is None and be_slots):
            raise AssertionError(f"block {block_id} holds slots without an owner")
        if rt_owner is None or be_owner is None:
            self._preemption_table.pop(block_id, None)
        if block.sealed_hash is None and rt_owner is None and be_owner is None:
            self._free[block_id] = None
        else:
            self._free.pop(block_id, None)
        private = block.sealed_hash is None
        empty = self.block_size - rt_slots - be_slots if private else 0  # NOTE: KVBlock.empty_slots, inline
        if private and rt_owner is not None and be_owner is None and empty > 0:
            self._be_shareable.add(block_id, empty, 0)
        else:
            self._be_shareable.discard(block_id)
        if private and be_owner is not None and rt_owner is None:
            self._rt_preemptible.add(block_id, empty, be_slots)
        else:
            self._rt_preemptible.discard(block_id)


def _remove_segments(segments: list[Segment], removed: Sequence[Segment]) -> None:
    """Takes ``removed`` (segments of ``segments``, in their order) out of ``segments``."""
    if all(kept is gone for kept, gone in zip(segments, removed)):
        del segments[:len(removed)]  # the usual case: the oldest private segments were sealed
    else:
        gone_ids = {id(segment) for segment in removed}
        segments[:] = [segment for segment in segments if id(segment) not in gone_ids]
