"""SSJF output-length predictor: a MiniLM proxy model forecasting a length distribution per prompt."""

from forethought.predict.artifact import Forecaster
from forethought.predict.batching import BatchingPredictor
from forethought.predict.buckets import QUANTILE_PERCENTS, LengthBuckets, ResidualSpread
from forethought.predict.history import NO_HISTORY, ConversationHistory
from forethought.predict.length_cache import LengthCache
from forethought.predict.length_forecast import (
    MAX_PROMPT_CHARS,
    LengthForecast,
    validate_prompt,
)
from forethought.predict.observations import Observation, ObservationStore
from forethought.predict.predictor import Predictor, PredictorHandle
from forethought.predict.proxy import Formulation
from forethought.predict.shipped import SHIPPED_DIR, PredictorChoice, resolve_predictor

__all__ = [
    "MAX_PROMPT_CHARS",
    "NO_HISTORY",
    "QUANTILE_PERCENTS",
    "SHIPPED_DIR",
    "BatchingPredictor",
    "ConversationHistory",
    "Forecaster",
    "Formulation",
    "LengthBuckets",
    "LengthCache",
    "LengthForecast",
    "Observation",
    "ObservationStore",
    "Predictor",
    "PredictorChoice",
    "PredictorHandle",
    "ResidualSpread",
    "resolve_predictor",
    "validate_prompt",
]
