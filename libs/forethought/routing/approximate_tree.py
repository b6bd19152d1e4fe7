"""SGLang router's approximate prefix tree, over chained block hashes instead of characters.

The SGLang router remembers, per worker, the prompts it routed there (not what the worker really
caches) and evicts least-recently-used leaves past ``max_tree_size``. A chained block hash names its
whole prefix, so "block hash -> workers" is the radix tree flattened: a prompt matches a worker as far
as its leading hashes were routed there.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

MAX_TREE_BLOCKS = 2**20
"""The SGLang router's ``max_tree_size`` (2**26 characters a worker) in 16-token blocks of about 4 characters
a token: past it a worker's oldest routed blocks go, so a long-running router's memory stays bounded."""


class ApproximatePrefixTree:
    """Per-worker LRU sets of routed block hashes."""

    def __init__(self, max_tree_size: int = MAX_TREE_BLOCKS) -> None:
        self.max_tree_size = max_tree_size
        self._blocks: dict[str, OrderedDict[int, None]] = {}

    def add_worker(self, worker_id: str) -> None:
        self._blocks.setdefault(worker_id, OrderedDict())

    def remove_worker(self, worker_id: str) -> None:
        self._blocks.pop(worker_id, None)

    def size(self, worker_id: str) -> int:
        return len(self._blocks[worker_id])

    def match(self, block_hashes: Sequence[int]) -> dict[str, int]:
        """Worker -> leading blocks of the prompt routed to it before."""
        depths: dict[str, int] = {}
        for worker_id, blocks in self._blocks.items():
            depth = 0
            while depth < len(block_hashes) and block_hashes[depth] in blocks:
                depth += 1
            depths[worker_id] = depth
        return depths

    def insert(self, worker_id: str, block_hashes: Sequence[int]) -> None:
        """Records a routed prompt; leaves are refreshed first so the root stays most recent."""
        blocks = self._blocks[worker_id]
        for block in reversed(block_hashes):
            blocks[block] = None
            blocks.move_to_end(block)
        # NOTE: leaves are older than their roots, so LRU order evicts leaves first, as SGLang does.
        while len(blocks) > self.max_tree_size:
            blocks.popitem(last=False)
