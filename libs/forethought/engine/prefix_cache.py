"""Local prefix cache: a radix tree of sealed KV blocks with LRU eviction (Preble section 4.3).

Each node is one full prompt block, keyed by its chained hash (``forethought.domain.block_hashes``), so a
node's key names its whole prefix and its parent is the node of the block before it. ``ref_count`` is
Preble's "number of active requests sharing the node". A node whose count drops to zero stays cached and
joins the LRU list; eviction takes the least recently released leaf. Requests release their blocks tail
first, so a parent is always released after its children and the LRU end is always a leaf.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class CachedBlock:
    """One radix-tree node: a sealed block after the prefix ``parent_hash``. Its tokens are not kept: the
    chained hash names them, and the ``BlockStored`` event that announced the block carries them."""

    block_hash: int
    parent_hash: int
    block_id: int
    ref_count: int = 0
    num_children: int = 0


class PrefixCache:
    """Hash -> sealed block, reference counts and the LRU order of unreferenced blocks."""

    def __init__(self) -> None:
        self._nodes: dict[int, CachedBlock] = {}
        self._evictable: OrderedDict[int, None] = OrderedDict()

    def __contains__(self, block_hash: int) -> bool:
        return block_hash in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def num_evictable(self) -> int:
        return len(self._evictable)

    def node(self, block_hash: int) -> CachedBlock:
        return self._nodes[block_hash]

    def match(self, block_hashes: Sequence[int]) -> list[CachedBlock]:
        """The cached nodes of the longest cached prefix of ``block_hashes``; no side effects."""
        matched: list[CachedBlock] = []
        for block_hash in block_hashes:
            node = self._nodes.get(block_hash)
            if node is None:
                break
            matched.append(node)
        return matched

    def match_length(self, block_hashes: Sequence[int], limit: int | None = None) -> int:
        """``len(match(block_hashes[:limit]))`` in O(log n) lookups, for the chained hashes of one prompt.

        NOTE: a node is only ever inserted under a cached parent (a request seals a block only under a
        parent it reads) and only leaves are evicted, so the cached blocks of one prompt's chain are always
        a prefix of it: the longest cached prefix is found by bisection.
        """
        nodes = self._nodes
        low, high = 0, len(block_hashes) if limit is None else min(limit, len(block_hashes))
        # the first ``low`` blocks are cached; the first ``high + 1`` are not all cached
        while low < high:
            middle = (low + high + 1) // 2
            if block_hashes[middle - 1] in nodes:
                low = middle
            else:
                high = middle - 1
        return low

    def referenced_length(self, block_hashes: Sequence[int], limit: int) -> int:
        """How many of the first ``limit`` blocks of ``block_hashes`` (all cached) some request reads.

        NOTE: every reader of a node reads all its ancestors, so reference counts never grow along a
        chain: the referenced blocks are a prefix of it, the unreferenced (evictable) ones the rest.
        """
        nodes = self._nodes
        low, high = 0, limit
        while low < high:
            middle = (low + high + 1) // 2
            if nodes[block_hashes[middle - 1]].ref_count > 0:
                low = middle
            else:
                high = middle - 1
        return low

    def acquire_chain(self, block_hashes: Sequence[int]) -> None:
        """``acquire`` of each block in order, in one pass."""
        nodes, pop = self._nodes, self._evictable.pop
        for block_hash in block_hashes:
            nodes[block_hash].ref_count += 1
            pop(block_hash, None)

    def acquire(self, block_hash: int) -> CachedBlock:
        """One more request reads this block; it leaves the LRU list while referenced."""
        node = self._nodes[block_hash]
        node.ref_count += 1
        self._evictable.pop(block_hash, None)
        return node

    def release(self, block_hash: int) -> None:
        """A reader is done; at zero readers the block becomes the most recently used evictable one."""
        node = self._nodes[block_hash]
        if node.ref_count <= 0:
            raise ValueError(f"block {block_hash} released more often than acquired")
        node.ref_count -= 1
        if node.ref_count == 0:
            self._evictable[block_hash] = None

    def release_chain(self, block_hashes: Sequence[int]) -> None:
        """``release`` of each block in order, in one pass."""
        nodes, evictable = self._nodes, self._evictable
        for block_hash in block_hashes:
            node = nodes[block_hash]
            if node.ref_count <= 0:
                raise ValueError(f"block {block_hash} released more often than acquired")
            node.ref_count -= 1
            if node.ref_count == 0:
                evictable[block_hash] = None

    def insert(self, block_hash: int, parent_hash: int, block_id: int) -> CachedBlock:
        """Adds a freshly sealed block, referenced once by the request that computed it."""
        if block_hash in self._nodes:
            raise ValueError(f"block {block_hash} is already cached")
        node = CachedBlock(block_hash, parent_hash, block_id, 1)
        self._nodes[block_hash] = node
        parent = self._nodes.get(parent_hash)
        if parent is not None:
            parent.num_children += 1
        return node

    def evict_lru(self) -> CachedBlock | None:
        """Removes and returns the least recently used unreferenced leaf, or None."""
        for block_hash in self._evictable:
            node = self._nodes[block_hash]
            if node.num_children == 0:
                del self._evictable[block_hash]
                del self._nodes[block_hash]
                parent = self._nodes.get(node.parent_hash)
                if parent is not None:
                    parent.num_children -= 1
                return node
        return None

    def evict_lru_leaves(self, count: int) -> list[CachedBlock]:
        """``evict_lru`` up to ``count`` times, stopping when nothing is left to evict; the evicted blocks."""
        evicted: list[CachedBlock] = []
        while len(evicted) < count and (node := self.evict_lru()) is not None:
            evicted.append(node)
        return evicted

    def evictable_hashes(self) -> tuple[int, ...]:
        """Unreferenced blocks, least recently used first (the order eviction follows)."""
        return tuple(self._evictable)
