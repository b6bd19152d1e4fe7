"""Chained block hashes of token ids (Preble section 4.1; vLLM automatic prefix caching).

A prompt is cut into full blocks of ``block_size`` tokens. Each block's hash covers its parent's hash
and its own tokens, so equal hashes mean equal prefixes. Workers translate their engine's own cache
events into these hashes, which is what lets the scheduler match a prompt against the Redis index.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

ROOT_PARENT = 0
"""The parent hash of a prompt's first block."""

_MASK = (1 << 63) - 1


def block_hash(parent: int, tokens: Sequence[int]) -> int:
    """Hash of one block: a stable 63-bit integer of the parent hash and the block's token ids."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(struct.pack("<q", parent))
    digest.update(struct.pack(f"<{len(tokens)}q", *tokens))
    # 63 bits keep the hash a positive signed int64, valid in protobuf, Redis and numpy alike.
    return int.from_bytes(digest.digest(), "little") & _MASK


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
    hashes: list[int] = []
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = block_hash(parent, token_ids[start : start + block_size])
        hashes.append(parent)
    return hashes
