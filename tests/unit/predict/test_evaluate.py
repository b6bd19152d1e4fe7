from __future__ import annotations

import json
from pathlib import Path

import pytest
from forethought.predict.evaluate import formulation_ablation
from forethought.predict.metrics import AccuracyReport, mean_report
from forethought.predict.proxy import Formulation


def report(accuracy: float, tau: float) -> AccuracyReport:
    return AccuracyReport(accuracy, 0.2, 100.0, tau, 0.1, 0.9, 50)


def test_mean_report_averages_every_score_and_keeps_the_sample_count() -> None:
    mean = mean_report([report(0.2, 0.1), report(0.3, 0.3)])
    assert mean.accuracy == pytest.approx(0.25)
    assert mean.kendall_tau == pytest.approx(0.2)
    assert mean.samples == 50


def test_formulation_ablation_scores_each_formulation_on_the_artifacts_own_test_split(quick_artifact: Path) -> None:
    rows = formulation_ablation(quick_artifact, seeds=(0, 1), embedding_cache=None)
    recorded = json.loads((quick_artifact / "config.json").read_text())["metrics"]["test"]
    # the artifact rescored here matches what training recorded: same splits, same states
    assert rows["installed artifact (reg-l1)"].as_dict() == pytest.approx(recorded["proxy model (reg-l1)"])
    assert rows["training mean"].as_dict() == pytest.approx(recorded["training mean"])
    for formulation in Formulation:
        seeds = [rows[f"{formulation.value}, seed {seed}"] for seed in (0, 1)]
        mean = rows[f"{formulation.value}, mean of 2 seeds"]
        assert mean.accuracy == pytest.approx((seeds[0].accuracy + seeds[1].accuracy) / 2)
        assert all(0.0 <= row.accuracy <= 1.0 and row.samples == recorded["training mean"]["samples"] for row in seeds)
    # different losses give different heads
    assert len({rows[f"{f.value}, seed 0"].mae_tokens for f in Formulation}) == len(Formulation)


def test_castillo_evaluation_prints_each_model_and_writes_json(quick_artifact: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    import gzip

    from forethought.predict.evaluate import OVERALL, main

    rows = [{"split": "validate", "prompt_id": str(index), "model": model, "prompt_text": f"Write {index * 40} words.",
             "output_sizes": [index * 40 + 5, index * 40 + 9]} for index in range(1, 7) for model in ("m1", "m2")]
    path = tmp_path / "castillo.jsonl.gz"
    with gzip.open(path, "wt") as stream:
        stream.writelines(json.dumps(row) + "\n" for row in rows)
    assert main(["--model", str(quick_artifact), "--castillo", str(path), "--json", str(tmp_path / "out.json"),
                 "--embedding-cache", str(tmp_path / "embeddings")]) == 0
    table = capsys.readouterr().out
    assert "| m1 | 6 |" in table and f"| {OVERALL} | 12 |" in table
    written = json.loads((tmp_path / "out.json").read_text())
    assert set(written["models"]) == {"m1", "m2", OVERALL}
    # the ceiling knows each pair's mean: it ranks the pair means perfectly
    assert written["models"]["m1"]["ceiling"]["tau_pair_mean"] == pytest.approx(1.0)
    assert written["models"][OVERALL]["forecast"]["samples"] == 24
