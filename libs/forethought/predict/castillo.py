"""CASTILLO-format length labels: (prompt, model) pairs each answered 10 times by an open model.

One JSON object a line (optionally gzip-compressed): ``split``, ``prompt_id``, ``dataset``, ``model``,
``prompt_text`` and ``output_sizes`` (the answers' lengths in the model's own tokens). The samples of a
pair are the distribution a forecast for that prompt and model aims at; their spread is what no
predictor can know (the evaluation's ceiling).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from forethought.domain import InvalidField


@dataclass(frozen=True)
class LengthPair:
    """One prompt answered several times by one model."""

    prompt_id: str
    model: str
    prompt: str
    output_sizes: tuple[int, ...]
    split: str = ""
    dataset: str = ""
    input_tokens: int = 0

    @property
    def mean(self) -> float:
        return float(np.mean(self.output_sizes))


def _lines(path: Path) -> Iterator[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as stream:  # type: ignore[operator]  # gzip.open and open share this call
        yield from stream


def load_pairs(path: Path, splits: Sequence[str] = ()) -> list[LengthPair]:
    """The pairs in ``path`` (those of ``splits`` when given), in file order.

    Raises:
        InvalidField: a line lacks a field or has no output sizes (the field names the line).
    """
    pairs = []
    for number, line in enumerate(_lines(Path(path)), start=1):
        if not line.strip():
            continue
        record = json.loads(line)
        if splits and record.get("split", "") not in splits:
            continue
        for name in ("prompt_id", "model", "prompt_text", "output_sizes"):
            if name not in record:
                raise InvalidField(f"line {number}.{name}", "is required")
        if not record["output_sizes"]:
            raise InvalidField(f"line {number}.output_sizes", "must hold at least one length")
        pairs.append(LengthPair(
            prompt_id=str(record["prompt_id"]), model=str(record["model"]), prompt=str(record["prompt_text"]),
            output_sizes=tuple(int(size) for size in record["output_sizes"]),
            split=str(record.get("split", "")), dataset=str(record.get("dataset", "")),
            input_tokens=int(record.get("input_size", 0)),
        ))
    return pairs


def by_model(pairs: Sequence[LengthPair]) -> dict[str, list[int]]:
    """Row indices of ``pairs`` per model, models sorted by name."""
    rows: dict[str, list[int]] = {}
    for index, pair in enumerate(pairs):
        rows.setdefault(pair.model, []).append(index)
    return dict(sorted(rows.items()))


def held_out(pair: LengthPair, share: float, salt: str = "") -> bool:
    """Whether ``pair``'s prompt is among a ``share`` of prompts drawn by a hash of its id (and ``salt``),
    so every model's pair of a prompt is drawn together."""
    digest = hashlib.blake2b((salt + pair.prompt_id).encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") / 2**32 < share


def castillo_splits(pairs: Sequence[LengthPair], validate_train_share: float, holdout_share: float) -> dict[str, list[LengthPair]]:
    """``fit`` (head weights), ``calibration`` (early stopping and spreads) and ``scored`` pairs: the train
    split and ``validate_train_share`` of the validate prompts are for training, ``holdout_share`` of those
    prompts for calibration; the other validate prompts are scored."""
    joins = [pair.split != "validate" or held_out(pair, validate_train_share, "validate:") for pair in pairs]
    training = [pair for pair, joined in zip(pairs, joins) if joined]
    return {
        "fit": [pair for pair in training if not held_out(pair, holdout_share)],
        "calibration": [pair for pair in training if held_out(pair, holdout_share)],
        "scored": [pair for pair, joined in zip(pairs, joins) if not joined],
    }
