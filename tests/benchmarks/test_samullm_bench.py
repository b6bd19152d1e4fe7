"""Smoke test of ``forethought bench samullm --quick``: every method plans every application both ways,
each plan is executed on the true lengths, and the search beats the Max-heuristic's estimate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.samullm import main
from tests.benchmarks.test_hermes_bench import table_rows

APPLICATIONS = {"ensembling", "routing", "chain summary"}


def test_a_quick_run_plans_and_executes_every_method_on_every_application(tmp_path: Path) -> None:
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "table.md").read_text()
    assert table.startswith("`forethought bench samullm --quick --out ")
    summary = table_rows(table, "SamuLLM against the better heuristic (end to end)")
    assert {(row[0], row[1], row[2]) for row in summary} == {
        (application, lengths, preemption) for application in APPLICATIONS
        for lengths in ("true", "sampled") for preemption in ("yes", "no")}
    runs = table_rows(table, "Every plan, executed on the true lengths")
    assert len(runs) == len(APPLICATIONS) * 2 * 5
    for application, lengths, method, preemption, _, search, estimated, executed, end_to_end, _ in runs:
        assert float(search) > 0 and float(executed) > 0
        assert float(end_to_end) == pytest.approx(float(search) + float(executed), rel=1e-3)
        if lengths == "true":  # told the truth, the plan's estimate is what executing it takes
            assert float(executed) == pytest.approx(float(estimated), rel=1e-3), (application, method, preemption)
    estimates = {(row[0], row[1], row[2], row[3]): float(row[6]) for row in runs}
    for application in APPLICATIONS:
        assert estimates[(application, "true", "SamuLLM", "yes")] <= estimates[(application, "true", "Max-heuristic", "yes")]
    results = json.loads((tmp_path / "results.json").read_text())
    assert len(results["outcomes"]) == len(runs)
    for application in APPLICATIONS:
        assert (tmp_path / f"{application.replace(' ', '_')}.png").read_bytes()[:4] == b"\x89PNG"
