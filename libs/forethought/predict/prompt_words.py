"""The whole prompt's words beside the backbone's window: the wide part of the predictor's head.

The backbone reads only the last ``max_tokens`` tokens of a prompt (32 in the shipped predictor, the
window that keeps a forecast under 10 ms on 2 CPU cores; SSJF section 3.1 reads 512 on a GPU), so it
misses what a prompt's opening asks for ("write an essay", "in one word", a code task's statement). A
linear term over hashed word uni- and bigrams of the whole prompt carries that at a fraction of a
millisecond: a shared column for every model plus one per known model, added in log space to the
head's estimate and trained with it (the any-model slot and a model the head does not know use the
shared column alone).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

PROMPT_END_CHARS = 2048
"""Characters read from each end of a long prompt: its words cost time linear in its length, and the
opening request and the closing question are where a long prompt says what it wants."""

_WORD = re.compile(r"\w+|[^\w\s]")


def word_buckets(prompt: str, buckets: int) -> np.ndarray:
    """The distinct hash buckets (of ``buckets``) of ``prompt``'s lower-cased word uni- and bigrams."""
    if len(prompt) > 2 * PROMPT_END_CHARS:
        prompt = prompt[:PROMPT_END_CHARS] + "\n" + prompt[-PROMPT_END_CHARS:]
    words = _WORD.findall(prompt.lower())
    grams = words + [first + " " + second for first, second in zip(words, words[1:])]
    # crc32, not hash(): str hashes change from one process to the next
    return np.unique(np.fromiter((zlib.crc32(gram.encode()) % buckets for gram in grams), np.int64, len(grams)))


@dataclass(frozen=True)
class WordBags:
    """Prompts' word buckets, flattened as ``nn.EmbeddingBag`` reads them."""

    buckets: torch.Tensor
    offsets: torch.Tensor

    @classmethod
    def of(cls, rows: Sequence[np.ndarray]) -> WordBags:
        # an empty prompt gets one bucket (0) so that every bag has a row to average
        rows = [row if len(row) else np.zeros(1, np.int64) for row in rows]
        offsets = np.cumsum([0] + [len(row) for row in rows[:-1]])
        return cls(torch.as_tensor(np.concatenate(rows) if rows else np.zeros(0, np.int64)), torch.as_tensor(offsets))


class WordTable(nn.Module):
    """Log-space terms of hashed prompt words: column ``len(models)`` is shared by every model, the
    others belong to one known model each."""

    def __init__(self, buckets: int, models: int) -> None:
        super().__init__()
        self.buckets = buckets
        self.models = models
        self.weights = nn.EmbeddingBag(buckets, models + 1, mode="mean", sparse=True)
        nn.init.zeros_(self.weights.weight)  # starts as no term: the head's estimate alone

    def bags(self, prompts: Sequence[str]) -> WordBags:
        return WordBags.of([word_buckets(prompt, self.buckets) for prompt in prompts])

    def forward(self, bags: WordBags, model_columns: torch.Tensor) -> torch.Tensor:
        """One term per bag; ``model_columns`` holds each row's known model, or -1 for the shared column alone."""
        columns = self.weights(bags.buckets, bags.offsets)
        own = columns.gather(1, model_columns.clamp(min=0)[:, None])[:, 0] * (model_columns >= 0)
        return columns[:, self.models] + own


def model_columns(known: Sequence[str], models: Sequence[str]) -> torch.Tensor:
    """Each model's column in a ``WordTable`` over ``known`` (-1: a model the table does not know)."""
    column = {model: index for index, model in enumerate(known)}
    return torch.as_tensor([column.get(model, -1) for model in models], dtype=torch.long)
