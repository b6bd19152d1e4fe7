"""In-process prefix index: which worker caches which block (Preble section 4.1, the global radix tree).

The simulator keeps one of these fed by engine cache events; the live scheduler uses the Redis index in
``forethought.prefix`` with the same ``apply`` / ``match`` meaning. Blocks are chained hashes, so a
prompt's cached prefix on a worker is the longest run of its leading block hashes that worker holds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from forethought.domain import AllBlocksCleared, BlockRemoved, BlockStored, CacheEvent


class InMemoryPrefixIndex:
    """Block hash -> workers caching it."""

    def __init__(self) -> None:
        self._holders: dict[int, set[str]] = defaultdict(set)
        self._blocks_of: dict[str, set[int]] = defaultdict(set)

    def apply(self, worker_id: str, events: Iterable[CacheEvent]) -> None:
        """Applies a worker's cache events in order."""
        holders = self._holders
        for event in events:
            if isinstance(event, BlockStored):
                for block in event.block_hashes:
                    holders[block].add(worker_id)
                self._blocks_of[worker_id].update(event.block_hashes)
            elif isinstance(event, BlockRemoved):
                self._forget(worker_id, event.block_hashes)
            elif isinstance(event, AllBlocksCleared):
                self.remove_worker(worker_id)

    def remove_worker(self, worker_id: str) -> None:
        self._forget(worker_id, list(self._blocks_of.get(worker_id, ())))
        self._blocks_of.pop(worker_id, None)

    def match(self, block_hashes: Sequence[int]) -> dict[str, int]:
        """Worker -> number of leading blocks of the prompt it caches (workers with none are absent)."""
        matched: dict[str, int] = {}
        alive = set(self._holders.get(block_hashes[0], ())) if block_hashes else set()
        for depth, block in enumerate(block_hashes):
            alive &= self._holders.get(block, set())
            if not alive:
                break
            for worker in alive:
                matched[worker] = depth + 1
        return matched

    def _forget(self, worker_id: str, blocks: Sequence[int]) -> None:
        holders = self._holders
        for block in blocks:
            workers = holders.get(block)
            if workers is not None:
                workers.discard(worker_id)
                if not workers:
                    del holders[block]
        self._blocks_of[worker_id].difference_update(blocks)
