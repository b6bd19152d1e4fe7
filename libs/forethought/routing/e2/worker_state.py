"""What E2 keeps about one worker (Preble section 4.2): its load history over the window H, a mirror of its
prefix cache, and the prompts placed on it and not yet finished.

Preble's global scheduler keeps per-GPU load from its own assignments and a global radix tree that records
a GPU for a node when it assigns a request there. ``E2WorkerState`` holds one worker's share of both, so
that removing a worker removes everything E2 knew about it at once.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from forethought.routing.ledger import Assignment


class WindowedSamples:
    """Samples added since a moving horizon, with their running sum, so a read is O(1)."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, float]] = deque()  # (time, value)
        self._total = 0.0

    def __len__(self) -> int:
        return len(self._samples)

    @property
    def total(self) -> float:
        return self._total

    def add(self, now: float, value: float) -> None:
        self._samples.append((now, value))
        self._total += value

    def expire(self, horizon: float) -> None:
        while self._samples and self._samples[0][0] < horizon:
            self._total -= self._samples.popleft()[1]
        if not self._samples:
            self._total = 0.0  # drop accumulated float error

    def mean(self) -> float:
        return self._total / len(self._samples)


def recent_hits(hits: deque[float], now: float, window_s: float) -> int:
    """Uses of a block within the window; older uses are dropped."""
    while hits and hits[0] < now - window_s:
        hits.popleft()
    return len(hits)


class CacheMirror:
    """The blocks a worker caches by our placements, least recently used first, with the times requests
    used them (the worker's radix tree as Preble's global scheduler sees it, flattened to block hashes)."""

    def __init__(self) -> None:
        self._blocks: OrderedDict[int, deque[float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def touch(self, block_hashes: Sequence[int], now: float, capacity: int, window_s: float) -> None:
        """Records a placed prompt, then evicts LRU blocks past ``capacity`` (0: unknown, keep all)."""
        # Leaf first, so the prompt's root ends most recently used: the engine frees a finished
        # request's blocks tail first, and evicts leaves before the prefixes they extend.
        blocks, horizon = self._blocks, now - window_s
        for block in reversed(block_hashes):
            hits = blocks.get(block)
            if hits is None:
                blocks[block] = hits = deque()
            else:
                blocks.move_to_end(block)
                while hits and hits[0] < horizon:  # a block every prompt shares is never evicted: bound its uses here
                    hits.popleft()
            hits.append(now)
        while capacity and len(self._blocks) > capacity:
            self._blocks.popitem(last=False)

    def drop_unused(self, now: float, window_s: float) -> None:
        """Drops LRU blocks no request used within the window: they cost nothing to evict."""
        while self._blocks and recent_hits(next(iter(self._blocks.values())), now, window_s) == 0:
            self._blocks.popitem(last=False)

    def evicted_nodes(
        self, blocks_to_free: float, pinned: set[int], now: float, window_s: float
    ) -> Iterator[tuple[int, int]]:
        """``(blocks, requests sharing them)`` of each run of blocks evicted, LRU first, to free
        ``blocks_to_free``: consecutive blocks used by the same requests form one radix-tree node.
        ``pinned`` blocks are never evicted."""
        run_blocks, run_hits = 0, 0
        for block, hits in self._blocks.items():
            if blocks_to_free <= 0:
                break
            if block in pinned:
                continue
            shared_by = recent_hits(hits, now, window_s)
            if shared_by != run_hits:
                yield run_blocks, run_hits
                run_blocks, run_hits = 0, shared_by
            run_blocks += 1
            blocks_to_free -= 1
        yield run_blocks, run_hits


@dataclass
class PlacedRequest:
    """A request placed on the worker and not finished yet."""

    prompt_blocks: tuple[int, ...]
    exploited_prefix: int | None  # the chained hash naming the cached prefix it exploited, if any
    # Modelled prefill not yet done (0 from its first token): the queue a request placed now waits
    # behind, which the window sum spreads over all of H.
    waiting_prefill_s: float


@dataclass
class E2WorkerState:
    """One worker as E2 sees it.

    NOTE: ``in_flight`` is the ledger's own dict of the worker's outstanding assignments: the ledger adds
    and removes them, E2 only reads it.
    """

    in_flight: Mapping[str, Assignment]
    configured_kv_blocks: int | None = None
    reported_kv_blocks: int = 0  # from the worker's latest load snapshot
    placed_prefill_s: WindowedSamples = field(default_factory=WindowedSamples)  # PT_r of placements in H
    cache: CacheMirror = field(default_factory=CacheMirror)
    # Prompt blocks of the requests in flight: cached here by the time a request placed now runs,
    # though no cache event has reported them yet.
    placed_blocks: Counter[int] = field(default_factory=Counter)
    requests: dict[str, PlacedRequest] = field(default_factory=dict)
    # Exploited prefix -> its (time, TTFT) samples, least recently sampled prefix first.
    ttfts: OrderedDict[int, deque[tuple[float, float]]] = field(default_factory=OrderedDict)

    @property
    def kv_capacity(self) -> int:
        """KV blocks of the worker: configured, else its latest snapshot's; 0 when unknown."""
        return self.configured_kv_blocks or self.reported_kv_blocks

    def free_blocks(self) -> float:
        capacity = self.kv_capacity
        return capacity - len(self.cache) if capacity else float("inf")

    def placed_depth(self, block_hashes: Sequence[int]) -> int:
        """Leading blocks of a prompt that the requests in flight here have placed."""
        depth = 0
        for block in block_hashes:
            if block not in self.placed_blocks:
                break
            depth += 1
        return depth

    def place(
        self, request_id: str, prompt_blocks: tuple[int, ...], exploited_prefix: int | None, prefill_s: float
    ) -> None:
        self.requests[request_id] = PlacedRequest(prompt_blocks, exploited_prefix, prefill_s)
        self.placed_blocks.update(prompt_blocks)

    def started(self, request_id: str) -> None:
        """The request produced its first token: its prefill is done."""
        self.requests[request_id].waiting_prefill_s = 0.0

    def waiting_prefill_total(self) -> float:
        """Modelled prefill of the requests placed here that have not produced their first token."""
        return sum(placed.waiting_prefill_s for placed in self.requests.values())

    def ttft_samples(self, prefix: int) -> deque[tuple[float, float]]:
        """The TTFT samples of an exploited prefix, which becomes the most recently sampled."""
        samples = self.ttfts.setdefault(prefix, deque())
        self.ttfts.move_to_end(prefix)
        return samples

    def release(self, request_id: str) -> None:
        """Forgets a finished request."""
        placed = self.requests.pop(request_id, None)
        if placed is None:
            return
        counts = self.placed_blocks
        for block in placed.prompt_blocks:
            left = counts[block] - 1
            if left > 0:
                counts[block] = left
            else:
                del counts[block]

    def expire(self, now: float, window_s: float) -> None:
        horizon = now - window_s
        self.placed_prefill_s.expire(horizon)
        self.cache.drop_unused(now, window_s)
        # Most conversations' prefixes are exploited a few times and never again.
        while self.ttfts and _newest_sample_before(next(iter(self.ttfts.values())), horizon):
            self.ttfts.popitem(last=False)


def _newest_sample_before(samples: deque[tuple[float, float]], horizon: float) -> bool:
    return not samples or samples[-1][0] < horizon
