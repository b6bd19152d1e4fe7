"""The output length sampler: an eCDF of observed lengths, capped as min(X, y, l_max - l_in)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from forethought.planner import OutputLengthCDF, capped_length, load_castillo, read_castillo
from forethought.planner.lengths import castillo_path


def test_the_ecdf_steps_at_each_observation() -> None:
    cdf = OutputLengthCDF.from_observations([30, 10, 20, 20])
    assert cdf.lengths == (10, 20, 20, 30)
    assert [cdf.cdf(x) for x in (9, 10, 19, 20, 30, 31)] == [0.0, 0.25, 0.25, 0.75, 1.0, 1.0]
    assert [cdf.quantile(p) for p in (0.0, 0.25, 0.26, 0.75, 0.76, 1.0)] == [10, 10, 20, 20, 30, 30]
    assert cdf.mean == 20.0


def test_sampling_is_seeded_and_draws_observations() -> None:
    cdf = OutputLengthCDF.from_observations(range(1, 1001))
    first = [cdf.sample(random.Random(7)) for _ in range(3)]
    again = [cdf.sample(random.Random(7)) for _ in range(3)]
    assert first == again
    draws = [cdf.sample(random.Random(seed)) for seed in range(200)]
    assert set(draws) <= set(cdf.lengths)
    assert 350 < sum(draws) / len(draws) < 650


@pytest.mark.parametrize(("sampled", "prompt", "max_seq_len", "limit", "expected"), [
    pytest.param(300, 100, 4096, None, 300, id="uncapped"),
    pytest.param(300, 100, 4096, 256, 256, id="explicit-limit"),
    pytest.param(300, 4000, 4096, None, 96, id="model-length"),
    pytest.param(300, 4000, 4096, 50, 50, id="both"),
    pytest.param(300, 4096, 4096, None, 1, id="at-least-one"),
])
def test_capped_length(sampled: int, prompt: int, max_seq_len: int, limit: int | None, expected: int) -> None:
    assert capped_length(sampled, prompt, max_seq_len, limit) == expected


def test_an_ecdf_needs_positive_observations() -> None:
    with pytest.raises(ValueError, match="at least one"):
        OutputLengthCDF.from_observations([])
    with pytest.raises(ValueError, match="positive"):
        OutputLengthCDF.from_observations([0, 5])


def test_castillo_rows_give_one_ecdf_per_model(tmp_path: Path) -> None:
    rows = [
        {"split": "train", "model": "m1", "output_sizes": [5, 7]},
        {"split": "validate", "model": "m1", "output_sizes": [9]},
        {"split": "train", "model": "m2", "output_sizes": [3, 0]},
    ]
    path = tmp_path / "castillo.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write("\n".join(json.dumps(row) for row in rows) + "\n")
    assert read_castillo(path) == {"m1": [5, 7, 9], "m2": [3]}
    assert read_castillo(path, split="train") == {"m1": [5, 7], "m2": [3]}
    assert load_castillo(path)["m1"].lengths == (5, 7, 9)


CASTILLO = castillo_path()


@pytest.mark.skipif(not CASTILLO.exists(), reason="the CASTILLO file is not on this machine")
def test_the_shared_castillo_file_gives_thirteen_models() -> None:
    cdfs = load_castillo(CASTILLO, split="validate")
    assert len(cdfs) == 13
    llama = cdfs["meta-llama--Llama-3.1-8B-Instruct"]
    assert llama.lengths[0] >= 1
    assert 0.0 < llama.cdf(llama.quantile(0.5)) <= 1.0
