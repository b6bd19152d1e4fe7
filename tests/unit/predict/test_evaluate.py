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
