"""The records of the bidirectional KV block manager (BROS section 5.1): blocks with an RT side and a BE
side, a request's segments of consecutive positions, preemption-table rows, allocation results, usage, and
the FindBlock / FindPreemptBlock candidate sets with running sums of their slots.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from forethought.domain import ServiceClass

RT_SIDE = 0
BE_SIDE = 1
SEALED = -1
"""Side of a segment that lives in a sealed, shared prefix-cache block."""


def side_of(service_class: ServiceClass) -> int:
    return RT_SIDE if service_class == ServiceClass.RT else BE_SIDE


class SealOutcome(enum.Enum):
    STORED = "stored"
    """A new cache node: announce it (``BlockStored``)."""
    SHARED = "shared"
    """An equal block was cached already: the private copy is freed, the cached one is read."""
    REFUSED = "refused"
    """Not a full, aligned, private block, or the request does not read the parent block."""

    def __bool__(self) -> bool:
        """True when the request now reads the block from the prefix cache."""
        return self is not SealOutcome.REFUSED


@dataclass(slots=True)
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


@dataclass(slots=True)
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


class CandidateBlocks:
    """A FindBlock / FindPreemptBlock candidate set with running sums of its blocks' empty and BE slots,
    so capacity queries cost O(1) instead of a scan of the set."""

    def __init__(self) -> None:
        self._members: dict[int, tuple[int, int]] = {}
        self.empty_slots = 0
        self.be_slots = 0

    def __contains__(self, block_id: object) -> bool:
        return block_id in self._members

    def __iter__(self) -> Iterator[int]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def empty_counts(self) -> list[int]:
        return [empty for empty, _ in self._members.values()]

    def add(self, block_id: int, empty: int, be_slots: int) -> None:
        """Adds the block, or updates its counts when it is a member already."""
        old_empty, old_be_slots = self._members.get(block_id, (0, 0))
        self._members[block_id] = (empty, be_slots)
        self.empty_slots += empty - old_empty
        self.be_slots += be_slots - old_be_slots

    def discard_all(self, block_ids: Iterable[int]) -> None:
        """``discard`` of each block, in one pass."""
        members = self._members
        if not members:
            return
        for block_id in block_ids:
            counted = members.pop(block_id, None)
            if counted is not None:
                self.empty_slots -= counted[0]
                self.be_slots -= counted[1]

    def discard(self, block_id: int) -> None:
        counted = self._members.pop(block_id, None)
        if counted is not None:
            self.empty_slots -= counted[0]
            self.be_slots -= counted[1]
