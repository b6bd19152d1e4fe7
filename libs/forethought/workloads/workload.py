"""What the simulator replays: requests, multi-turn conversations and closed-loop batches (BROS section 7.1).

A prompt is stored as a short list of ``TokenSegment``s rather than token ids: each segment expands into a
deterministic run of token ids, so ten thousand 1,000-token prompts cost kilobytes until they arrive, and
two prompts built from equal segments share an exact token prefix (which is what the prefix cache sees).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from forethought.domain import ServiceClass

VOCAB_LOW = 100
"""Token ids are drawn from [VOCAB_LOW, VOCAB_HIGH); low ids are left to special tokens."""
VOCAB_HIGH = 32_000


@dataclass(frozen=True)
class TokenSegment:
    """``length`` tokens of the deterministic stream named by (``namespace``, ``key``).

    A shorter segment of the same stream is a prefix of a longer one.
    """

    namespace: str
    key: int
    length: int

    def token_ids(self) -> list[int]:
        return list(expand_segments((self,)))


_MASK64 = (1 << 64) - 1


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on unsigned 64-bit words (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    mixed: np.ndarray = x ^ (x >> np.uint64(31))
    return mixed


def _stream_seed(segment: TokenSegment) -> int:
    return ((zlib.crc32(segment.namespace.encode()) << 32) ^ segment.key) & _MASK64


def expand_segments(segments: Sequence[TokenSegment]) -> tuple[int, ...]:
    """The token ids of a prompt made of ``segments``, in order.

    Token ``i`` of a stream is a SplitMix64 hash of (stream seed, ``i``): a counter-based generator, so the
    whole prompt is one vectorized pass instead of a seeded generator per segment (a Mooncake prompt has
    some 24 segments of 512 tokens).
    """
    kept = [segment for segment in segments if segment.length > 0]
    if not kept:
        return ()
    lengths = np.array([segment.length for segment in kept], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    seeds = _mix64(np.array([_stream_seed(segment) for segment in kept], dtype=np.uint64))
    positions = (np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(starts, lengths)).astype(np.uint64)
    with np.errstate(over="ignore"):
        words = _mix64(np.repeat(seeds, lengths) + positions * np.uint64(0x9E3779B97F4A7C15))
    return tuple((words % np.uint64(VOCAB_HIGH - VOCAB_LOW) + np.uint64(VOCAB_LOW)).astype(np.int64).tolist())


@dataclass(frozen=True)
class RequestClass:
    """The service class and SLOs a loader gives every request it reads (BROS section 3)."""

    service_class: ServiceClass = ServiceClass.RT
    ttft_slo_s: float = 0.0
    tpot_slo_s: float = 0.0


@dataclass(frozen=True)
class TraceRequest:
    """One request of a workload: its arrival, prompt, output length and service class.

    ``output_tokens`` is the length the request will generate (traces record it; the engine is told to
    ignore EOS and stop there). SLOs of 0 mean none.
    """

    request_id: str
    arrival_s: float
    prompt: tuple[TokenSegment, ...]
    output_tokens: int
    service_class: ServiceClass = ServiceClass.RT
    ttft_slo_s: float = 0.0
    tpot_slo_s: float = 0.0

    @property
    def prompt_tokens(self) -> int:
        return sum(segment.length for segment in self.prompt)

    def prompt_token_ids(self) -> tuple[int, ...]:
        return expand_segments(self.prompt)

    def at(self, arrival_s: float) -> TraceRequest:
        """The same request arriving at ``arrival_s``."""
        return replace(self, arrival_s=arrival_s)


@dataclass(frozen=True)
class Conversation:
    """A multi-turn chat: turn ``i + 1`` arrives ``think_time_s`` after turn ``i`` completes.

    Each turn's prompt already contains the earlier turns (user and assistant messages), so consecutive
    turns share a prefix. The ``arrival_s`` of turns after the first is ignored.
    """

    conversation_id: str
    start_s: float
    turns: tuple[TraceRequest, ...]
    think_time_s: float = 0.0


@dataclass(frozen=True)
class ClosedLoopBatches:
    """Best-effort batches, each submitted when every request of the previous one has completed.

    Lengths are uniform over the inclusive ranges (BROS section 7.1: prompts 512-1024, outputs 32-128).
    No batch is submitted once ``max_batches`` were, or at or after ``stop_s``; with neither set the
    source is endless and the simulation needs a horizon.
    """

    name: str
    batch_size: int
    prompt_tokens: tuple[int, int] = (512, 1024)
    output_tokens: tuple[int, int] = (32, 128)
    start_s: float = 0.0
    max_batches: int | None = None
    stop_s: float | None = None
    seed: int = 0
    service_class: ServiceClass = ServiceClass.BE

    @property
    def is_endless(self) -> bool:
        return self.max_batches is None and self.stop_s is None

    def submits(self, index: int, now: float) -> bool:
        """Whether batch ``index`` is still submitted when it comes due at ``now``."""
        if self.max_batches is not None and index >= self.max_batches:
            return False
        return self.stop_s is None or now < self.stop_s

    def batch(self, index: int, submitted_s: float) -> list[TraceRequest]:
        """Batch number ``index``, arriving at ``submitted_s``; the same index gives the same batch."""
        rng = np.random.default_rng((self.seed, index))
        prompt_lengths = rng.integers(self.prompt_tokens[0], self.prompt_tokens[1] + 1, self.batch_size)
        output_lengths = rng.integers(self.output_tokens[0], self.output_tokens[1] + 1, self.batch_size)
        return [
            TraceRequest(
                request_id=f"{self.name}-b{index}-{position}",
                arrival_s=submitted_s,
                prompt=(TokenSegment(f"{self.name}/{self.seed}", index * self.batch_size + position,
                                     int(prompt_lengths[position])),),
                output_tokens=int(output_lengths[position]),
                service_class=self.service_class,
            )
            for position in range(self.batch_size)
        ]


@dataclass(frozen=True)
class Workload:
    """Everything one simulation replays; the three sources can be mixed freely."""

    requests: tuple[TraceRequest, ...] = ()
    conversations: tuple[Conversation, ...] = ()
    batches: tuple[ClosedLoopBatches, ...] = ()
