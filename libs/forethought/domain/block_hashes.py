"""Chained block hashes of token ids (Preble section 4.1; vLLM automatic prefix caching).

A prompt is cut into full blocks of ``block_size`` tokens. Each block's hash covers its parent's hash
and its own tokens, so equal hashes mean equal prefixes. Workers translate their engine's own cache
events into these hashes, which is what lets the scheduler match a prompt against the Redis index.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from functools import lru_cache

ROOT_PARENT = 0
"""The parent hash of a prompt's first block."""

_MASK = (1 << 63) - 1


def block_hash(parent: int, tokens: Sequence[int]) -> int:
    """Hash of one block: a stable 63-bit integer of the parent hash and the block's token ids."""
    return _hash(_layout(len(tokens)), parent, tokens)


@lru_cache(maxsize=64)
def _layout(tokens: int) -> struct.Struct:
    """The bytes hashed for a block: the parent, then each token id, as little-endian int64."""
    return struct.Struct(f"<q{tokens}q")


def _hash(layout: struct.Struct, parent: int, tokens: Sequence[int]) -> int:
    digest = hashlib.blake2b(layout.pack(parent, *tokens), digest_size=8).digest()
    # 63 bits keep the hash a positive signed int64, valid in protobuf, Redis and numpy alike.
    return int.from_bytes(digest, "little") & _MASK


def chained_block_hashes(
    token_ids: Sequence[int], block_size: int, parent: int = ROOT_PARENT
) -> list[int]:
    """Hashes of every full block of ``token_ids``; a trailing partial block is not hashed.

    Args:
        token_ids: the prompt's token ids.
        block_size: tokens per block (16 matches vLLM's default).
        parent: hash of the block before ``token_ids[0]``; ``ROOT_PARENT`` at the start of a prompt.
    """
    if block_size <= 0:
        raise ValueError("block_size must be positive")
    layout = _layout(block_size)
    hashes: list[int] = []
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = _hash(layout, parent, token_ids[start : start + block_size])
        hashes.append(parent)
    return hashes
