"""What a worker has told the prefix index it caches (Preble section 4.1): the blocks its engine's cache
events stored and did not remove since, so that an index that lost them (Redis restarted or flushed,
or the worker swept out after a partition) can be given the whole set again."""

from __future__ import annotations

from collections.abc import Iterable

from forethought.domain.cache_events import AllBlocksCleared, BlockRemoved, BlockStored, CacheEvent


class PublishedBlocks:
    """The block hashes an engine caches, as its cache events tell them, in first-stored order."""

    def __init__(self) -> None:
        self._blocks: dict[int, None] = {}  # a dict keeps insertion order: parents before children

    def __len__(self) -> int:
        return len(self._blocks)

    def apply(self, events: Iterable[CacheEvent]) -> None:
        for event in events:
            if isinstance(event, BlockStored):
                self._blocks.update(dict.fromkeys(event.block_hashes))
            elif isinstance(event, BlockRemoved):
                for block in event.block_hashes:
                    self._blocks.pop(block, None)
            elif isinstance(event, AllBlocksCleared):
                self._blocks.clear()

    def block_hashes(self) -> tuple[int, ...]:
        return tuple(self._blocks)
