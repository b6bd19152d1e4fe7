"""The ground floor: the nouns every layer shares. Imports nothing of the project.

Requests and their output (``generation``), prefix-cache events (``cache_events``), load snapshots
(``engine_stats``), the chained block hashes that name cached prefixes (``block_hashes``), and the
rules a request keeps, checked once (``validate_generation``; a broken rule is an ``InvalidField``).
"""

from forethought.domain.block_hashes import (
    ROOT_PARENT,
    block_hash,
    chained_block_hashes,
)
from forethought.domain.cache_events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    CacheEvent,
)
from forethought.domain.engine_stats import ClassLoad, EngineStats
from forethought.domain.generation import (
    MAX_LOGPROBS,
    MAX_PROMPT_TOKENS,
    MAX_TOKENS_LIMIT,
    FinishReason,
    GenerationChunk,
    GenerationRequest,
    InvalidField,
    PositionLogprobs,
    SamplingParams,
    ServiceClass,
    StructuredOutput,
    TokenLogprob,
    Usage,
    require,
    validate_generation,
    validate_prompt,
    validate_sampling,
    validate_structured_output,
    validate_terms,
)

__all__ = [
    "MAX_LOGPROBS",
    "MAX_PROMPT_TOKENS",
    "MAX_TOKENS_LIMIT",
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
    "InvalidField",
    "PositionLogprobs",
    "SamplingParams",
    "ServiceClass",
    "StructuredOutput",
    "TokenLogprob",
    "Usage",
    "block_hash",
    "chained_block_hashes",
    "require",
    "validate_generation",
    "validate_prompt",
    "validate_sampling",
    "validate_structured_output",
    "validate_terms",
]
