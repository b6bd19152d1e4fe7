from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from forethought.domain import InvalidField
from forethought.predict.castillo import by_model, load_pairs


def write_rows(path: Path, rows: list[dict[str, object]]) -> Path:
    with gzip.open(path, "wt") as stream:
        stream.writelines(json.dumps(row) + "\n" for row in rows)
    return path


def row(prompt_id: str, model: str, split: str = "validate", sizes: tuple[int, ...] = (3, 5)) -> dict[str, object]:
    return {"split": split, "prompt_id": prompt_id, "dataset": "Alpaca", "model": model,
            "prompt_text": f"prompt {prompt_id}", "output_sizes": list(sizes)}


def test_pairs_load_from_a_gzipped_file_filtered_by_split(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "c.jsonl.gz", [row("a", "m2"), row("b", "m1", "train"), row("c", "m1")])
    pairs = load_pairs(path, ["validate"])
    assert [(pair.prompt_id, pair.model, pair.mean) for pair in pairs] == [("a", "m2", 4.0), ("c", "m1", 4.0)]
    assert by_model(load_pairs(path)) == {"m1": [1, 2], "m2": [0]}


def test_a_line_without_lengths_is_named(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "c.jsonl.gz", [row("a", "m"), row("b", "m", sizes=())])
    with pytest.raises(InvalidField, match="line 2.output_sizes"):
        load_pairs(path)


def test_splits_keep_every_model_of_a_prompt_together_and_score_only_unseen_validate_prompts() -> None:
    from forethought.predict.castillo import LengthPair, castillo_splits

    pairs = [LengthPair(str(index), model, f"p{index}", (1,), "validate" if index % 2 else "train")
             for index in range(400) for model in ("a", "b")]
    splits = castillo_splits(pairs, validate_train_share=0.5, holdout_share=0.1)
    assert sum(len(rows) for rows in splits.values()) == len(pairs)
    ids = {name: {pair.prompt_id for pair in rows} for name, rows in splits.items()}
    assert not ids["scored"] & (ids["fit"] | ids["calibration"]) and not ids["fit"] & ids["calibration"]
    assert all(pair.split == "validate" for pair in splits["scored"])
    assert 70 < len(ids["scored"]) < 130  # about half of the 200 validate prompts
    assert castillo_splits(pairs, 0.0, 0.1)["scored"] == [pair for pair in pairs if pair.split == "validate"]

