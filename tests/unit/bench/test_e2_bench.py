"""Smoke test of ``forethought bench e2``: a tiny tool-prompt run still compares every router."""

from __future__ import annotations

from pathlib import Path

from forethought.bench.e2 import ROUTERS, main


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
