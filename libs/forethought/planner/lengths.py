"""The output length sampler (SamuLLM sections 2 and 4.1): a per-model empirical CDF with length caps.

The paper finds that a model's output length follows one distribution regardless of the prompt (unless the
prompt or the settings limit it), so it samples ``X ~ F_out`` from lengths observed on many requests and
caps it: ``l_out = min(X, y, l_max - l_in)`` with ``y`` the job's explicit limit and ``l_max`` the model's
longest sequence.

``load_castillo(path)`` reads the lengths of 13 open models from a CASTILLO file (the dataset's
``output_sizes``, ten answers per prompt); the data stays where it is (``castillo_path()`` finds the shared
copy), the path is the caller's.
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forethought.workloads.data_dir import default_data_dir


@dataclass(frozen=True)
class OutputLengthCDF:
    """``F_out`` of one model: the sorted observed lengths, each equally likely."""

    lengths: tuple[int, ...]

    @classmethod
    def from_observations(cls, lengths: Iterable[int]) -> OutputLengthCDF:
        """The eCDF of ``lengths``; ValueError when there are none or one is not positive."""
        ordered = tuple(sorted(lengths))
        if not ordered:
            raise ValueError("an output length eCDF needs at least one observed length")
        if ordered[0] <= 0:
            raise ValueError(f"observed output lengths must be positive, got {ordered[0]}")
        return cls(ordered)

    def cdf(self, length: float) -> float:
        """``F_out(length)``: the share of observations at most ``length``."""
        return bisect.bisect_right(self.lengths, length) / len(self.lengths)

    def quantile(self, probability: float) -> int:
        """The least observed length ``x`` with ``F_out(x) >= probability`` (the inverse eCDF)."""
        if not 0.0 <= probability <= 1.0:
            raise ValueError("probability must be in [0, 1]")
        index = max(0, math.ceil(probability * len(self.lengths)) - 1)
        return self.lengths[min(index, len(self.lengths) - 1)]

    def sample(self, rng: random.Random) -> int:
        """One ``X ~ F_out`` (an observation drawn uniformly)."""
        return self.lengths[rng.randrange(len(self.lengths))]

    @property
    def mean(self) -> float:
        return sum(self.lengths) / len(self.lengths)


def capped_length(sampled: int, prompt_tokens: int, max_seq_len: int, limit: int | None = None) -> int:
    """``min(X, y, l_max - l_in)``, at least one token (an engine always samples one)."""
    capped = min(sampled, max_seq_len - prompt_tokens)
    if limit is not None:
        capped = min(capped, limit)
    return max(1, capped)


CASTILLO_FILE = "castillo_train_validate.jsonl.gz"


def castillo_path(data_dir: Path | str | None = None) -> Path:
    """The CASTILLO file under ``data_dir`` (default: ``forethought.workloads``' data directory)."""
    return Path(data_dir if data_dir is not None else default_data_dir()) / "castillo" / CASTILLO_FILE


def read_castillo(path: Path | str, split: str | None = None) -> dict[str, list[int]]:
    """Observed output lengths per CASTILLO model name (``output_sizes`` of every row of ``split``).

    Args:
        path: a CASTILLO JSON-lines file, gzip-compressed when its name ends in ``.gz``.
        split: ``train`` or ``validate`` to keep only that split; None keeps every row.
    """
    observed: dict[str, list[int]] = {}
    for row in castillo_rows(path, split):
        observed.setdefault(row["model"], []).extend(int(size) for size in row["output_sizes"] if size > 0)
    return observed


def castillo_rows(path: Path | str, split: str | None = None) -> Iterator[dict[str, Any]]:
    """The rows of a CASTILLO file (gzip-compressed when its name ends in ``.gz``) in ``split``, or all."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                row = json.loads(line)
                if split is None or row.get("split") == split:
                    yield row


@dataclass(frozen=True)
class CastilloAnswers:
    """One (prompt, model) row of CASTILLO: the prompt's length and the model's answers' lengths."""

    prompt_id: str
    model: str
    input_tokens: int
    output_sizes: tuple[int, ...]


def read_castillo_answers(path: Path | str, split: str | None = None) -> dict[str, dict[str, CastilloAnswers]]:
    """Every row of ``split`` by prompt id, then model: what each model really answered each prompt."""
    prompts: dict[str, dict[str, CastilloAnswers]] = {}
    for row in castillo_rows(path, split):
        sizes = tuple(int(size) for size in row["output_sizes"] if size > 0)
        if sizes:
            prompts.setdefault(row["prompt_id"], {})[row["model"]] = CastilloAnswers(
                row["prompt_id"], row["model"], int(row["input_size"]), sizes)
    return prompts


def load_castillo(path: Path | str, split: str | None = None) -> dict[str, OutputLengthCDF]:
    """One eCDF per model of a CASTILLO file (see ``read_castillo``)."""
    return {model: OutputLengthCDF.from_observations(found) for model, found in read_castillo(path, split).items()}

