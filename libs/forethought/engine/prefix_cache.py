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


@dataclass
class CachedBlock:
    """One radix-tree node: a sealed block holding ``token_ids`` after the prefix ``parent_hash``."""

    block_hash: int
    parent_hash: int
    block_id: int
    token_ids: tuple[int, ...]
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

    def insert(
        self, block_hash: int, parent_hash: int, block_id: int, token_ids: tuple[int, ...]
    ) -> CachedBlock:
        """Adds a freshly sealed block, referenced once by the request that computed it."""
        if block_hash in self._nodes:
            raise ValueError(f"block {block_hash} is already cached")
        node = CachedBlock(block_hash, parent_hash, block_id, token_ids, ref_count=1)
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

    def evictable_hashes(self) -> tuple[int, ...]:
        """Unreferenced blocks, least recently used first (the order eviction follows)."""
        return tuple(self._evictable)
