"""A worker's load snapshot: what E2's load cost (Preble section 4.2) and BROS's priorities read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClassLoad:
    running: int = 0
    waiting: int = 0


@dataclass(frozen=True)
class EngineStats:
    """A load snapshot: what E2's load cost and BROS's priorities need."""

    rt: ClassLoad = ClassLoad()
    be: ClassLoad = ClassLoad()
    kv_cache_usage: float = 0.0
    prefill_tokens_per_s: float = 0.0
    decode_tokens_per_s: float = 0.0
    mean_queueing_delay_s: float = 0.0
    prefix_hit_ratio: float = 0.0
    total_kv_blocks: int = 0
    block_size: int = 16
