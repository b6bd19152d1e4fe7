"""Registry of served models' tokenizers, loaded lazily and offline (DESIGN.md "tokenizer" service)."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path

from forethought.tokenize.builtin import (
    BUILTIN_SOURCES,
    DEFAULT_CACHE_ROOT,
    converted_folder,
)
from forethought.tokenize.model_tokenizer import ModelTokenizer

BUILTIN = "builtin"


class UnknownModel(LookupError):
    """The requested model has no tokenizer in this registry (the service answers NOT_FOUND)."""

    def __init__(self, model: str, known: list[str]) -> None:
        super().__init__(f"unknown model {model!r}; known models: {', '.join(sorted(known)) or 'none'}")
        self.model = model


def default_models() -> dict[str, str]:
    """Every built-in model name, each resolved from its package."""
    return {name: BUILTIN for name in BUILTIN_SOURCES}


class TokenizerRegistry:
    """Maps model names to tokenizers.

    Args:
        models: model name -> a Hugging Face tokenizer folder path, or ``"builtin"`` for a packaged one
            (see ``BUILTIN_SOURCES``). Defaults to every built-in model.
        cache_root: where converted built-in tokenizers are cached.
    """

    def __init__(self, models: Mapping[str, str] | None = None, cache_root: Path = DEFAULT_CACHE_ROOT) -> None:
        self._sources = dict(default_models() if models is None else models)
        for name, source in self._sources.items():
            if source == BUILTIN and name not in BUILTIN_SOURCES:
                raise ValueError(f"{name!r} is not a built-in model ({', '.join(BUILTIN_SOURCES)})")
        self._cache_root = cache_root
        self._loaded: dict[str, ModelTokenizer] = {}
        self._lock = threading.Lock()

    @property
    def models(self) -> list[str]:
        return sorted(self._sources)

    def get(self, model: str) -> ModelTokenizer:
        """The tokenizer of ``model``, loaded on first use.

        Raises:
            UnknownModel: ``model`` is not registered.
        """
        if model not in self._sources:
            raise UnknownModel(model, list(self._sources))
        with self._lock:
            if model not in self._loaded:
                self._loaded[model] = ModelTokenizer(model, self._load(model))
            return self._loaded[model]

    def _load(self, model: str) -> object:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoTokenizer

        source = self._sources[model]
        folder = converted_folder(BUILTIN_SOURCES[model], self._cache_root) if source == BUILTIN else Path(source)
        return AutoTokenizer.from_pretrained(str(folder))
