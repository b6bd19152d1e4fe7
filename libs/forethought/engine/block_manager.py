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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from forethought.engine.backend import ServiceClass
from forethought.engine.prefix_cache import PrefixCache

RT_SIDE = 0
BE_SIDE = 1
SEALED = -1
"""Side of a segment that lives in a sealed, shared prefix-cache block."""


def side_of(service_class: ServiceClass) -> int:
    return RT_SIDE if service_class == ServiceClass.RT else BE_SIDE


@dataclass
class KVBlock:
    block_id: int
    owners: list[str | None] = field(default_factory=lambda: [None, None])
    counts: list[int] = field(default_factory=lambda: [0, 0])
    sealed_hash: int | None = None

    def empty_slots(self, block_size: int) -> int:
        return 0 if self.sealed_hash is not None else block_size - self.counts[0] - self.counts[1]

    @property
    def is_unused(self) -> bool:
        return self.sealed_hash is None and self.owners[0] is None and self.owners[1] is None


@dataclass
class Segment:
    """Token positions ``[start, start + count)`` of one request, held on one side of one block."""

    block_id: int
    side: int
    start: int
    count: int

    @property
    def end(self) -> int:
        return self.start + self.count


@dataclass(frozen=True)
class PreemptionEntry:
    """A block where an RT request overwrote slots of a BE request (BROS's preemption table row)."""

    rt_request: str
    be_request: str
    overwritten_slots: int


@dataclass
class AllocationResult:
    """What one ``allocate`` did beyond handing out slots; the executor turns it into copies."""

    checkpointed: dict[str, int] = field(default_factory=dict)
    restored_slots: int = 0
    evicted: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class KVUsage:
    rt_slots: int
    be_slots: int
    sealed_in_use_slots: int
    evictable_slots: int
    free_slots: int
    host_slots: int
    total_slots: int

    @property
    def used_fraction(self) -> float:
        used = self.rt_slots + self.be_slots + self.sealed_in_use_slots
        return used / self.total_slots if self.total_slots else 0.0


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
        self._be_shareable: set[int] = set()
        self._rt_preemptible: set[int] = set()
        self._segments: dict[str, list[Segment]] = {}
        self._host: dict[str, list[tuple[int, int]]] = {}
        self._host_used = 0
        self._preemption_table: dict[int, PreemptionEntry] = {}

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
        return tuple(self._segments.get(request_id, ()))

    def host_ranges(self, request_id: str) -> tuple[tuple[int, int], ...]:
        """Checkpointed ``(start, count)`` position ranges of the request on the host tier."""
        return tuple(self._host.get(request_id, ()))

    def checkpointed_slots(self, request_id: str) -> int:
        return sum(count for _, count in self._host.get(request_id, ()))

    def tokens_held(self, request_id: str) -> int:
        on_gpu = sum(segment.count for segment in self._segments.get(request_id, ()))
        return on_gpu + self.checkpointed_slots(request_id)

    def can_allocate(self, request_id: str, service_class: ServiceClass, num_tokens: int) -> bool:
        """Whether ``allocate`` would succeed: restore of checkpointed slots plus ``num_tokens`` new."""
        needed = self.checkpointed_slots(request_id) + num_tokens
        return needed <= self.free_capacity(request_id, service_class)

    def free_capacity(self, request_id: str, service_class: ServiceClass) -> int:
        """Slots ``allocate`` can hand this request now, restores included (a lower bound for RT)."""
        whole = (len(self._free) + (self._cache.num_evictable if self._cache else 0)) * self.block_size
        if service_class == ServiceClass.BE:
            return self._be_dry_run(request_id, whole // self.block_size)
        capacity = self._tail_empty(request_id) + whole
        if self.bidirectional:
            capacity += sum(self._empty(b) for b in self._rt_preemptible)
            overwritable = sum(self._blocks[b].counts[BE_SIDE] for b in self._rt_preemptible)
            capacity += min(self.host_free_slots, overwritable)
        return capacity

    def _be_dry_run(self, request_id: str, whole_blocks: int) -> int:
        """Replays BE placement on counts: checkpointed ranges first, then what is left for new tokens.

        Returns checkpointed + new slots available, or 0 when the restore itself cannot be placed.
        """
        shared = sorted((self._empty(b) for b in self._be_shareable), reverse=True) if self.bidirectional else []
        room_after = {s.end: self._empty(s.block_id) for s in self._segments.get(request_id, ()) if s.side != SEALED}
        for start, count in self._host.get(request_id, ()):
            beside = min(count, room_after.pop(start, 0))
            position, left = start + beside, count - beside
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
        rt = sum(b.counts[RT_SIDE] for b in self._blocks)
        be = sum(b.counts[BE_SIDE] for b in self._blocks)
        evictable = self._cache.num_evictable if self._cache else 0
        sealed = sum(1 for b in self._blocks if b.sealed_hash is not None) - evictable
        return KVUsage(
            rt_slots=rt,
            be_slots=be,
            sealed_in_use_slots=sealed * self.block_size,
            evictable_slots=evictable * self.block_size,
            free_slots=len(self._free) * self.block_size,
            host_slots=self.host_capacity_slots - self.host_free_slots,
            total_slots=self.num_blocks * self.block_size,
        )

    # ---- commits -------------------------------------------------------------------------------------

    def acquire_cached(self, request_id: str, block_hashes: Sequence[int]) -> int:
        """Makes a request that holds nothing read the cached blocks of its prefix; returns tokens reused."""
        if self._cache is None or self._segments.get(request_id):
            return 0
        segments = self._segments.setdefault(request_id, [])
        for index, block_hash in enumerate(block_hashes):
            node = self._cache.acquire(block_hash)
            segments.append(Segment(node.block_id, SEALED, index * self.block_size, self.block_size))
        return len(block_hashes) * self.block_size

    def allocate(
        self, request_id: str, service_class: ServiceClass, num_tokens: int
    ) -> AllocationResult:
        """Restores the request's checkpointed slots, then gives it ``num_tokens`` new slots."""
        if not self.can_allocate(request_id, service_class, num_tokens):
            raise MemoryError(f"no KV slots for {num_tokens} tokens of {request_id}")
        result = AllocationResult()
        start = self.tokens_held(request_id)
        for range_start, count in sorted(self._host.pop(request_id, [])):
            self._host_used -= count
            self._place(request_id, service_class, range_start, count, result)
            result.restored_slots += count
        self._place(request_id, service_class, start, num_tokens, result)
        return result

    def seal(
        self, request_id: str, start: int, block_hash: int, parent_hash: int, token_ids: tuple[int, ...]
    ) -> bool:
        """Moves the full, aligned, privately held block at ``start`` into the prefix cache."""
        if self._cache is None or block_hash in self._cache:
            return False
        for segment in self._segments.get(request_id, ()):
            if segment.start == start and segment.side != SEALED and segment.count == self.block_size:
                block = self._blocks[segment.block_id]
                block.owners, block.counts, block.sealed_hash = [None, None], [0, 0], block_hash
                segment.side = SEALED
                self._reindex(block)
                self._cache.insert(block_hash, parent_hash, block.block_id, token_ids)
                return True
        return False

    def release(self, request_id: str) -> None:
        """Frees every slot of the request; its sealed blocks stay cached, tail first in LRU order."""
        for segment in reversed(self._segments.pop(request_id, [])):
            block = self._blocks[segment.block_id]
            if segment.side == SEALED:
                assert self._cache is not None and block.sealed_hash is not None
                self._cache.release(block.sealed_hash)
                continue
            block.owners[segment.side] = None
            block.counts[segment.side] = 0
            self._reindex(block)
        self._host_used -= self.checkpointed_slots(request_id)
        self._host.pop(request_id, None)

    # ---- placement -----------------------------------------------------------------------------------

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

    def _extend(self, request_id: str, start: int, count: int) -> int:
        segment = self._segment_ending_at(request_id, start)
        if segment is None:
            return 0
        block = self._blocks[segment.block_id]
        taken = min(count, block.empty_slots(self.block_size))
        segment.count += taken
        block.counts[segment.side] += taken
        self._reindex(block)
        return taken

    def _take_whole_block(
        self, request_id: str, service_class: ServiceClass, start: int, count: int, result: AllocationResult
    ) -> int:
        if self._free:
            block_id, _ = self._free.popitem(last=False)
        elif self._cache is not None and (node := self._cache.evict_lru()) is not None:
            block_id = node.block_id
            self._blocks[block_id].sealed_hash = None
            result.evicted.append(node.block_hash)
        else:
            return 0
        return self._open_side(request_id, service_class, block_id, start, count)

    def _take_shared_block(
        self, request_id: str, service_class: ServiceClass, start: int, count: int, result: AllocationResult
    ) -> int:
        """FindBlock for BE; FindPreemptBlock for RT (the BE block with the most empty slots)."""
        if not self.bidirectional:
            return 0
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
        self._checkpoint(victim, victim_segment.end, taken)
        if victim_segment.count == 0:
            self._segments[victim].remove(victim_segment)
            block.owners[BE_SIDE] = None
        block.counts[BE_SIDE] -= taken
        block.counts[RT_SIDE] += taken
        segment.count += taken
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
        block.counts[side] = taken
        self._segments.setdefault(request_id, []).append(Segment(block_id, side, start, taken))
        self._reindex(block)
        return taken

    # ---- bookkeeping ---------------------------------------------------------------------------------

    def _segment_ending_at(self, request_id: str, position: int) -> Segment | None:
        # Newest first: a side just opened for an overwrite must win over an older tail.
        for segment in reversed(self._segments.get(request_id, ())):
            if segment.end == position and segment.side != SEALED:
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

    def _tail_empty(self, request_id: str) -> int:
        segment = self._segment_ending_at(request_id, self.tokens_held(request_id))
        return self._blocks[segment.block_id].empty_slots(self.block_size) if segment else 0

    def _empty(self, block_id: int) -> int:
        return self._blocks[block_id].empty_slots(self.block_size)

    def _reindex(self, block: KVBlock) -> None:
        """Keeps the free list, the FindBlock/FindPreemptBlock candidate sets and the table in step."""
        block_id = block.block_id
        rt_owner, be_owner = block.owners
        for side, owner in enumerate(block.owners):
            if owner is None and block.counts[side]:
                raise AssertionError(f"block {block_id} side {side} holds slots without an owner")
        self._be_shareable.discard(block_id)
        self._rt_preemptible.discard(block_id)
        if block.is_unused:
            self._free[block_id] = None
            self._preemption_table.pop(block_id, None)
            return
        self._free.pop(block_id, None)
        if rt_owner is None or be_owner is None:
            self._preemption_table.pop(block_id, None)
        if block.sealed_hash is not None:
            return
        if rt_owner is not None and be_owner is None and self._empty(block_id) > 0:
            self._be_shareable.add(block_id)
        if be_owner is not None and rt_owner is None:
            self._rt_preemptible.add(block_id)
