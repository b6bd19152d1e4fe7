"""Smoke test of ``forethought bench e2``: a tiny tool-prompt run still compares every router."""

from __future__ import annotations

from pathlib import Path

from forethought.workloads.azure import azure_arrivals

from benchmarks.e2 import (
    E2_HISTORY_WINDOW_S,
    ROUTERS,
    Scenario,
    Traces,
    build_workload,
    main,
    router_runs,
)


def table_rows(table: str, title: str) -> list[list[str]]:
    section = table.split(f"### {title}\n", 1)[1].split("###", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]  # past the header
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def test_a_small_run_reports_every_router_with_hit_ratios_below_the_ideal(tmp_path: Path) -> None:
    status = main(["--requests", "40", "--engines", "2", "--workloads", "toolprompt", "--rates", "4",
                   "--out", str(tmp_path)])
    assert status == 0
    table = (tmp_path / "table.md").read_text()
    rows = table_rows(table, "toolprompt, 4/s per engine, 2 engines")
    assert [row[0] for row in rows] == list(ROUTERS)
    for row in rows:
        assert int(row[1]) == 40  # every request completed
        hit_ratio, ideal = float(row[6]), float(row[7])
        assert 0.0 < hit_ratio <= ideal <= 1.0
    round_robin = next(row for row in rows if row[0] == "round_robin")
    assert round_robin[8:] == ["1.00x", "1.00x"]
    assert table_rows(table, "Summary")[0][:3] == ["toolprompt", "4", "2"]
    assert (tmp_path / "latency_toolprompt_2.png").read_bytes()[:4] == b"\x89PNG"


def test_router_runs_give_e2_one_run_per_threshold_and_the_baselines_one() -> None:
    runs = router_runs(["e2", "round_robin"], [1.15, 15.0])
    assert [run.label for run in runs] == ["e2 Th_bal=1.15", "e2 Th_bal=15", "round_robin"]
    assert [run.options.get("rebalance_threshold") for run in runs] == [1.15, 15.0, None]
    assert all(run.options["history_window_s"] == E2_HISTORY_WINDOW_S for run in runs[:2])
    assert [run.label for run in router_runs(["e2"], [])] == ["e2"]


def test_a_threshold_sweep_writes_one_sensitivity_row_per_threshold(tmp_path: Path) -> None:
    status = main(["--requests", "40", "--engines", "2", "--workloads", "toolprompt", "--rates", "4",
                   "--routers", "e2,weighted", "--e2-rebalance-thresholds", "1.5,1e9", "--out", str(tmp_path)])
    assert status == 0
    table = (tmp_path / "table.md").read_text()
    sensitivity = table_rows(table, "Th_bal sensitivity")
    assert [row[3] for row in sensitivity] == ["1.5", "1e+09"]
    assert {row[8] for row in sensitivity} == {"weighted"}  # the best non-E2 router, round-robin aside
    runs = table_rows(table, "toolprompt, 4/s per engine, 2 engines")
    assert [row[0] for row in runs] == ["e2 Th_bal=1.5", "e2 Th_bal=1e+09", "weighted", "round_robin"]
    assert all(int(row[1]) == 40 for row in runs)


def test_azure_tool_serves_the_tool_prompts_at_the_azure_code_arrivals(tmp_path: Path) -> None:
    traces = Traces(mooncake=None, data_dir=None)
    tools = build_workload(Scenario("toolprompt", 4.0), 2, 60, traces, seed=3)
    azure = build_workload(Scenario("azure-tool", 4.0), 2, 60, traces, seed=3)
    assert [r.prompt for r in azure.requests] == [r.prompt for r in tools.requests]
    assert [r.arrival_s for r in azure.requests] == list(azure_arrivals("code", 60, 8.0))
    status = main(["--requests", "40", "--engines", "2", "--workloads", "azure-tool", "--rates", "4",
                   "--routers", "e2,weighted", "--out", str(tmp_path)])
    assert status == 0
    rows = table_rows((tmp_path / "table.md").read_text(), "azure-tool, 4/s per engine, 2 engines")
    assert [(row[0], int(row[1])) for row in rows] == [("e2", 40), ("weighted", 40), ("round_robin", 40)]
