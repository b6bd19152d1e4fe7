"""The ground floor: the nouns every layer shares. Imports nothing of the project.

Requests and their output (``generation``), prefix-cache events (``cache_events``), load snapshots
(``engine_stats``) and the chained block hashes that name cached prefixes (``block_hashes``).
"""

from forethought.domain.block_hashes import ROOT_PARENT, block_hash, chained_block_hashes
from forethought.domain.cache_events import AllBlocksCleared, BlockRemoved, BlockStored, CacheEvent
from forethought.domain.engine_stats import ClassLoad, EngineStats
from forethought.domain.generation import (
    FinishReason,
    GenerationChunk,
    GenerationRequest,
    SamplingParams,
    ServiceClass,
    Usage,
)

__all__ = [
    "ROOT_PARENT",
    "AllBlocksCleared",
    "BlockRemoved",
    "BlockStored",
    "CacheEvent",
    "ClassLoad",
    "EngineStats",
    "FinishReason",
    "GenerationChunk",
    "GenerationRequest",
    "SamplingParams",
    "ServiceClass",
    "Usage",
    "block_hash",
    "chained_block_hashes",
]
