"""Smoke test of ``forethought bench hermes --quick``: every scheduler replays every run, and knowing the
truth beats request-level FCFS."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.hermes import CONTENDERS, main


def table_rows(table: str, title: str) -> list[list[str]]:
    section = table.split(f"### {title}\n", 1)[1].split("###", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]  # past the header
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def test_a_quick_run_compares_every_scheduler_and_the_oracle_beats_fcfs(tmp_path: Path) -> None:
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "table.md").read_text()
    assert table.startswith("`forethought bench hermes --quick --out ")
    rows = table_rows(table, "ACT at load 0.85")
    assert [row[0] for row in rows] == [contender.label for contender in CONTENDERS]
    assert {row[1] for row in rows} == {"80"}  # every run finished under every scheduler
    mean = {row[0]: float(row[2]) for row in rows}
    assert mean["oracle (SRPT on the truth)"] <= mean["vLLM (request FCFS)"]
    assert [row[0] for row in table_rows(table, "Deadline attainment at load 0.5")] == [
        "EDF", "LSTF (Hermes-DDL)", "vLLM (request FCFS)", "Gittins (Hermes)"]
    knobs = table_rows(table, "Prewarm knob, each run alone")
    assert [row[0] for row in knobs] == ["off", "0.5", "0.9"]
    assert knobs[0][3:6] == ["0", "0", "0"]  # no prewarm, no benefit, with the knob off
    assert float(knobs[1][5]) > 0  # prewarming at K=0.5 takes warm-up off the critical path
    assert float(knobs[1][1]) < float(knobs[0][1])  # and the runs finish sooner
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results) == {"command", "act", "deadlines", "prewarm"}
    for plot in ("act_mean.png", "act_p95.png", "prewarm_knob.png"):
        assert (tmp_path / plot).read_bytes()[:4] == b"\x89PNG"
