"""Deterministic output tokens for engines that model time instead of running weights.

Each request gets its own stream, seeded by a hash of its request id (and ``SamplingParams.seed`` when
set), so the same workload yields the same tokens in every run and on every worker. Ids are valid for the
model's vocabulary (SmolLM2's 49,152 by default), which keeps detokenization and stop handling real.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Protocol

from forethought.engine.backend import GenerationRequest

SMOLLM2_VOCAB_SIZE = 49152


class TokenSource(Protocol):
    """The id of the ``index``-th output token of ``request``."""

    def __call__(self, request: GenerationRequest, index: int) -> int: ...


class SeededTokenSource:
    """Uniform ids in ``[0, vocab_size)`` from a per-request hash stream."""

    def __init__(self, vocab_size: int = SMOLLM2_VOCAB_SIZE) -> None:
        if vocab_size < 2:
            raise ValueError("vocab_size must be at least 2")
        self.vocab_size = vocab_size

    def __call__(self, request: GenerationRequest, index: int) -> int:
        seed = request.sampling.seed if request.sampling.seed is not None else 0
        digest = hashlib.blake2b(
            request.request_id.encode() + struct.pack("<qq", seed, index), digest_size=8
        ).digest()
        return int.from_bytes(digest, "little") % self.vocab_size
