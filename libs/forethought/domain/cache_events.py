"""What an engine reports of its prefix cache (Preble section 4.1): blocks stored, removed, all cleared.

Blocks are named by the chained hashes of ``forethought.domain.block_hashes`` whatever the engine, so the
prefix index has one shape.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BlockStored:
    """Blocks now cached, in prompt order; ``parent_hash`` is the block before the first one."""

    block_hashes: tuple[int, ...]
    parent_hash: int
    token_ids: tuple[int, ...]
    block_size: int


@dataclass(frozen=True)
class BlockRemoved:
    block_hashes: tuple[int, ...]


@dataclass(frozen=True)
class AllBlocksCleared:
    pass


CacheEvent = BlockStored | BlockRemoved | AllBlocksCleared
