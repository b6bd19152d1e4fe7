"""Observed output lengths of repeated prompts (SSJF section 6, "Use of Semantic Cache").

Prompts that differ only in case, surrounding or repeated whitespace map to one key. Near-duplicates
(a word changed, a line added) are found by MinHash over word 3-shingles with banded locality-sensitive
hashing: a prompt whose estimated Jaccard similarity to a cached one reaches ``near_threshold`` gets that
prompt's length. A hit answers with the last observed length instead of running the proxy model.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict, defaultdict

import numpy as np

_WHITESPACE = re.compile(r"\s+")
SHINGLE_WORDS = 3
MINHASH_BANDS, MINHASH_ROWS = 16, 4  # 64 hash functions; a 0.8-similar pair shares a band with p > 0.99
_RNG = np.random.default_rng(20240427)
# multiply-shift hashing: (a * x + b) mod 2**64, top 32 bits, with a odd (uint64 arithmetic wraps)
_MULTIPLIERS = _RNG.integers(0, 1 << 63, MINHASH_BANDS * MINHASH_ROWS, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
_OFFSETS = _RNG.integers(0, 1 << 63, MINHASH_BANDS * MINHASH_ROWS, dtype=np.uint64)


def normalize(prompt: str) -> str:
    return _WHITESPACE.sub(" ", prompt.strip().lower())


def prompt_key(prompt: str) -> str:
    """Hash of the prompt with case and whitespace runs normalized."""
    return hashlib.blake2b(normalize(prompt).encode(), digest_size=16).hexdigest()


def minhash_signature(prompt: str) -> np.ndarray:
    """64 MinHash values of the prompt's word 3-shingles (one shingle for shorter prompts)."""
    words = normalize(prompt).split(" ")
    shingles = {" ".join(words[start : start + SHINGLE_WORDS]) for start in range(max(1, len(words) - SHINGLE_WORDS + 1))}
    hashes = np.fromiter(
        (int.from_bytes(hashlib.blake2b(s.encode(), digest_size=4).digest(), "little") for s in shingles),
        dtype=np.uint64, count=len(shingles),
    )
    return ((np.outer(hashes, _MULTIPLIERS) + _OFFSETS) >> np.uint64(32)).min(axis=0)


def estimated_jaccard(first: np.ndarray, second: np.ndarray) -> float:
    return float(np.mean(first == second))


def _bands(signature: np.ndarray) -> list[tuple[int, bytes]]:
    return [(band, signature[band * MINHASH_ROWS : (band + 1) * MINHASH_ROWS].tobytes()) for band in range(MINHASH_BANDS)]


class LengthCache:
    """LRU map of prompt -> last observed output length, at most ``capacity`` entries.

    Args:
        capacity: entries kept; the least recently used is evicted first.
        near_threshold: estimated Jaccard similarity for a near-duplicate hit; ``None`` matches exact
            (normalized) prompts only.
    """

    def __init__(self, capacity: int = 10_000, near_threshold: float | None = 0.8) -> None:
        self._capacity = capacity
        self._near_threshold = near_threshold
        self._lengths: OrderedDict[str, int] = OrderedDict()
        self._signatures: dict[str, np.ndarray] = {}
        self._band_members: defaultdict[tuple[int, bytes], set[str]] = defaultdict(set)

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def near_threshold(self) -> float | None:
        return self._near_threshold

    def __len__(self) -> int:
        return len(self._lengths)

    def get(self, prompt: str) -> int | None:
        """The observed length of this prompt or, failing that, of its most similar near-duplicate."""
        key = prompt_key(prompt)
        if key not in self._lengths and self._near_threshold is not None:
            key = self._nearest(minhash_signature(prompt)) or key
        if key not in self._lengths:
            return None
        self._lengths.move_to_end(key)
        return self._lengths[key]

    def put(self, prompt: str, output_tokens: int) -> None:
        key = prompt_key(prompt)
        if key not in self._lengths and self._near_threshold is not None:
            signature = minhash_signature(prompt)
            self._signatures[key] = signature
            for band in _bands(signature):
                self._band_members[band].add(key)
        self._lengths[key] = output_tokens
        self._lengths.move_to_end(key)
        while len(self._lengths) > self._capacity:
            self._forget(self._lengths.popitem(last=False)[0])

    def _nearest(self, signature: np.ndarray) -> str | None:
        candidates = set().union(*(self._band_members.get(band, set()) for band in _bands(signature)))
        scored = [(estimated_jaccard(signature, self._signatures[key]), key) for key in candidates]
        best = max(scored, default=(0.0, ""))
        return best[1] if self._near_threshold is not None and best[0] >= self._near_threshold else None

    def _forget(self, key: str) -> None:
        signature = self._signatures.pop(key, None)
        if signature is None:
            return
        for band in _bands(signature):
            members = self._band_members[band]
            members.discard(key)
            if not members:
                del self._band_members[band]
