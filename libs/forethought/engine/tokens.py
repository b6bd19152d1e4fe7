"""Deterministic output tokens for engines that model time instead of running weights.

Each request gets its own stream, seeded by a hash of its request id (and ``SamplingParams.seed`` when
set), so the same workload yields the same tokens in every run and on every worker. Ids are valid for the
model's vocabulary (SmolLM2's 49,152 by default), which keeps detokenization and stop handling real.
"""

from __future__ import annotations

import functools
import hashlib
import struct
from typing import Protocol

from forethought.domain import GenerationRequest

SMOLLM2_VOCAB_SIZE = 49152


class TokenSource(Protocol):
    """The id of the ``index``-th output token of ``request``."""

    def __call__(self, request: GenerationRequest, index: int) -> int: ...


class SeededTokenSource:
    """Uniform ids in ``[0, vocab_size)`` from a per-request SplitMix64 stream.

    The stream's origin is a hash of the request id and seed, computed once per request; each token is
    then a few integer operations, which matters because the simulator draws millions of them.
    """

    def __init__(self, vocab_size: int = SMOLLM2_VOCAB_SIZE) -> None:
        if vocab_size < 2:
            raise ValueError("vocab_size must be at least 2")
        self.vocab_size = vocab_size

    def __call__(self, request: GenerationRequest, index: int) -> int:
        seed = request.sampling.seed if request.sampling.seed is not None else 0
        state = (_stream_origin(request.request_id, seed) + (index + 1) * _GOLDEN_GAMMA) & _MASK64
        return _splitmix64(state) % self.vocab_size


_MASK64 = (1 << 64) - 1
_GOLDEN_GAMMA = 0x9E3779B97F4A7C15


@functools.lru_cache(maxsize=8192)
def _stream_origin(request_id: str, seed: int) -> int:
    digest = hashlib.blake2b(request_id.encode() + struct.pack("<q", seed), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _splitmix64(state: int) -> int:
    """The SplitMix64 output function (Steele, Lea and Flood, 2014)."""
    z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)
