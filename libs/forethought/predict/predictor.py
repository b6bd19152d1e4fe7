"""The predictor service's library: forecasts with a length cache, online observations, refit, hot reload.

SSJF section 3 predicts each request's output length once, on arrival; section 6 suggests answering
repeated prompts from observed lengths. The service keeps learning: completed requests are observed,
``refit`` retrains the head on them (phase 2 of the paper's fine-tuning) and swaps the new model in.
Forecasts are for a served model: one the head knows uses what it learned of it; another starts from the
model-agnostic forecast and is calibrated online from its own observations (``OnlineCalibration``,
rebuilt from the observation store on load, so the calibration persists with the observations).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from forethought.cache import PREDICTOR_DIR
from forethought.domain import InvalidField
from forethought.predict.artifact import Forecaster
from forethought.predict.buckets import QUANTILE_PERCENTS, ResidualSpread
from forethought.predict.calibration import OnlineCalibration
from forethought.predict.fitting import fit_head
from forethought.predict.history import (
    NO_HISTORY,
    ConversationHistory,
    validate_history,
    validated_histories,
)
from forethought.predict.length_cache import LengthCache
from forethought.predict.length_forecast import (
    MAX_PROMPT_CHARS,
    LengthForecast,
    validate_length,
    validate_prompt,
    validate_prompts,
)
from forethought.predict.observations import Observation, ObservationStore
from forethought.predict.proxy import training_targets
from forethought.predict.served_models import SERVED_MODEL
from forethought.predict.shipped import SHIPPED_DIR

MIN_REFIT_OBSERVATIONS = 8
# served models with a length cache of their own; a request naming yet another evicts the oldest
MAX_CACHED_MODELS = 64
# below this many observations the validation residuals of the trained model are kept
MIN_RECALIBRATION_OBSERVATIONS = 50


class PredictorHandle:
    """Holds the current forecaster; ``swap`` replaces it atomically.

    A prediction takes a reference under the lock and runs outside it, so in-flight predictions
    finish on the forecaster they started with.
    """

    def __init__(self, forecaster: Forecaster) -> None:
        self._forecaster = forecaster
        self._lock = threading.Lock()

    @property
    def current(self) -> Forecaster:
        with self._lock:
            return self._forecaster

    def swap(self, forecaster: Forecaster) -> Forecaster:
        """Install ``forecaster``; returns the previous one."""
        with self._lock:
            previous, self._forecaster = self._forecaster, forecaster
            return previous


class Predictor:
    """Length forecasts for prompts (service facade).

    Args:
        forecaster: the trained model.
        artifact_dir: where it was loaded from (refits are written beside it).
        store: observed lengths for refits (in memory when not given).
        cache: observed lengths of repeated prompts.
    """

    def __init__(
        self,
        forecaster: Forecaster,
        artifact_dir: Path | None = None,
        store: ObservationStore | None = None,
        cache: LengthCache | None = None,
        max_prompt_chars: int = MAX_PROMPT_CHARS,
    ) -> None:
        self.handle = PredictorHandle(forecaster)
        self.artifact_dir = artifact_dir
        self.store = store if store is not None else ObservationStore(None)
        self.cache = cache if cache is not None else LengthCache()
        self.max_prompt_chars = max_prompt_chars
        self.calibration = OnlineCalibration()
        self._caches: dict[str, LengthCache] = {SERVED_MODEL: self.cache}
        self._forwards = 0
        self._count_lock = threading.Lock()
        for observation in self.store.snapshot():
            self._learn(observation)

    @classmethod
    def load(cls, directory: Path, observations_path: Path | None = None, **options: object) -> Predictor:
        """Load the artifact in ``directory``; observations persist to ``observations_path`` if given."""
        store = ObservationStore(observations_path)
        return cls(Forecaster.load(Path(directory)), Path(directory), store, **options)  # type: ignore[arg-type]  # options: __init__'s keywords

    def warm_up(self) -> None:
        """Readies the forecaster's forward before the first request (``Forecaster.warm_up``); a refitted
        head shares it."""
        self.handle.current.warm_up()

    @property
    def version(self) -> int:
        return self.handle.current.config.version

    @property
    def forward_count(self) -> int:
        """Model forward passes run so far (one per ``predict`` call with cache misses)."""
        return self._forwards

    def predict(
        self, prompts: Sequence[str], histories: Sequence[ConversationHistory] | None = None,
        models: Sequence[str] | None = None,
    ) -> list[LengthForecast]:
        """One forecast per prompt, in order, in its served model's tokens; cache hits skip the model.
        ``histories``: none, or one per prompt (its conversation's earlier answers). ``models``: none (every
        prompt for ``SERVED_MODEL``), or one per prompt ("" for ``SERVED_MODEL``).

        Raises:
            InvalidField: a prompt is not a non-blank string (a longer one than ``max_prompt_chars`` is read by
                its ends: ``validate_prompt``).
            InvalidField: ``histories`` or ``models`` does not pair with ``prompts``, or a history holds a
                negative length.
        """
        prompts = validate_prompts(prompts, self.max_prompt_chars)
        histories = validated_histories(histories, len(prompts))
        served = validated_models(models, len(prompts))
        forecaster = self.handle.current
        observed = [self._cache_of(model).get(prompt) for prompt, model in zip(prompts, served)]
        misses = [index for index, length in enumerate(observed) if length is None]
        modelled = iter(
            forecaster.forecast(
                [prompts[index] for index in misses], [histories[index] for index in misses],
                [served[index] for index in misses], self.calibration,
            ) if misses else []
        )
        if misses:
            with self._count_lock:
                self._forwards += 1
        return [next(modelled) if length is None else cached_forecast(length, forecaster) for length in observed]

    def observe(self, prompt: str, actual_tokens: int, history: ConversationHistory = NO_HISTORY, model: str = "") -> None:
        """Record a completed request's true output length for its served ``model`` ("" for ``SERVED_MODEL``);
        for a model the head does not know, this calibrates its forecasts."""
        prompt = validate_prompt(prompt, "prompt", self.max_prompt_chars)
        validate_length(actual_tokens)
        validate_history(history)
        model = model or SERVED_MODEL
        forecaster = self.handle.current
        estimate = None
        if forecaster.config.models and not forecaster.knows(model):
            inputs = forecaster.inputs(forecaster.embed([prompt]), [prompt], [history], [model])
            estimate = float(forecaster.log_estimates_for(inputs, forecaster.word_terms([prompt], [model]))[0])
        observation = Observation(prompt, actual_tokens, history, model, estimate)
        self.store.append(observation)
        self._learn(observation)

    def _learn(self, observation: Observation) -> None:
        model = observation.model or SERVED_MODEL
        self._cache_of(model).put(observation.prompt, observation.output_tokens)
        if observation.agnostic_log_estimate is not None:
            self.calibration.add(model, observation.output_tokens, observation.agnostic_log_estimate)

    def _cache_of(self, model: str) -> LengthCache:
        with self._count_lock:
            if model not in self._caches and len(self._caches) >= MAX_CACHED_MODELS:
                # bounded: the length cache of the model seen longest ago (never the default's) makes room
                del self._caches[next(name for name in self._caches if name != SERVED_MODEL)]
            return self._caches.setdefault(model, LengthCache(self.cache.capacity, self.cache.near_threshold))

    def refit(self, out_dir: Path | None = None, epochs: int = 30, learning_rate: float = 5e-4) -> Path:
        """Retrain the head on the stored observations, save the new version and swap it in.

        Returns:
            The new artifact folder (default: beside the loaded one, named ``<name>-v<version>``; for the
            shipped predictor, in the cache folder).

        Raises:
            ValueError: fewer than ``MIN_REFIT_OBSERVATIONS`` observations.
        """
        observations = self.store.snapshot()
        if len(observations) < MIN_REFIT_OBSERVATIONS:
            raise ValueError(f"refit needs at least {MIN_REFIT_OBSERVATIONS} observations, has {len(observations)}")
        base = self.handle.current
        prompts = [observation.prompt for observation in observations]
        models = [observation.model or SERVED_MODEL for observation in observations]
        inputs = base.inputs(base.embed(prompts), prompts, [observation.history for observation in observations], models)
        word_terms = base.word_terms(prompts, models)
        lengths = np.asarray([observation.output_tokens for observation in observations], dtype=float)
        fit_rows, calibration_rows = refit_rows(len(observations))
        head = copy.deepcopy(base.model.head)
        targets = training_targets(base.config.formulation, lengths, base.buckets)
        if base.words is not None:  # the word table stays as it is: the head learns what its term leaves
            targets = targets - torch.as_tensor(word_terms)
        head_state = fit_head(
            head, base.config.formulation, inputs[fit_rows], targets[fit_rows], epochs=epochs, learning_rate=learning_rate
        )
        candidate = base.with_head(head_state, base.spread, version=base.config.version + 1)
        spread = base.spread
        if len(calibration_rows):
            estimates = candidate.log_estimates_for(inputs[calibration_rows], word_terms[calibration_rows])
            spread = ResidualSpread.from_pairs(lengths[calibration_rows], estimates)
        refitted = base.with_head(
            head_state, spread, version=base.config.version + 1,
            training=dict(base.config.training, refit_observations=len(observations), refit_epochs=epochs),
        )
        target = out_dir or self._sibling_dir(refitted.config.version)
        refitted.save(target)
        self.handle.swap(refitted)
        self.artifact_dir = target
        return target

    def reload(self, directory: Path) -> int:
        """Load the artifact in ``directory``, warm it up and swap it in; returns its version."""
        forecaster = Forecaster.load(Path(directory))
        forecaster.warm_up()  # while the one it replaces serves, so no forecast waits on its forward being built
        self.handle.swap(forecaster)
        self.artifact_dir = Path(directory)
        return forecaster.config.version

    def _sibling_dir(self, version: int) -> Path:
        if self.artifact_dir is None:
            raise ValueError("refit of a predictor not loaded from a folder needs out_dir")
        stem = self.artifact_dir.name.split("-v")[0]
        # the package's folder is no place to write: refits of the shipped head go beside the fine-tuned one
        parent = PREDICTOR_DIR.parent if self.artifact_dir.resolve() == SHIPPED_DIR else self.artifact_dir.parent
        return parent / f"{stem}-v{version}"


def validated_models(models: Sequence[str] | None, count: int) -> list[str]:
    """``models`` checked against ``count`` prompts, "" read as ``SERVED_MODEL``; none: all ``SERVED_MODEL``."""
    if models is None:
        return [SERVED_MODEL] * count
    if len(models) != count:
        raise InvalidField("models", f"must be empty or hold one model per prompt ({count}), got {len(models)}")
    for index, model in enumerate(models):
        if not isinstance(model, str):
            raise InvalidField(f"models[{index}]", "must be a string")
    return [model or SERVED_MODEL for model in models]


def refit_rows(count: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows to fit on and rows to recalibrate on (every fifth, once there are enough)."""
    rows = np.arange(count)
    if count < MIN_RECALIBRATION_OBSERVATIONS:
        return rows, rows[:0]
    return rows[rows % 5 != 0], rows[rows % 5 == 0]


def cached_forecast(observed_tokens: int, forecaster: Forecaster) -> LengthForecast:
    """A point-mass forecast at the observed length."""
    bucket = int(forecaster.buckets.index([observed_tokens])[0])
    histogram = tuple(1.0 if index == bucket else 0.0 for index in range(forecaster.buckets.count))
    return LengthForecast(
        mean=float(observed_tokens),
        quantiles={percent: float(observed_tokens) for percent in QUANTILE_PERCENTS},
        bucket=bucket,
        histogram=histogram,
        source="cache",
        bucket_edges=forecaster.config.bucket_edges,
    )
