import pytest
from forethought.config import MissingPrerequisite

import benchmarks as bench
from benchmarks.report import (
    LineSeries,
    ResultTable,
    format_cell,
    line_plot,
    results_dir,
    write_table,
)


def test_table_renders_markdown_and_is_printed(tmp_path, capsys) -> None:
    table = ResultTable(["policy", "latency (s)", "share"], title="Demo")
    table.add("fcfs", 1.23456, None)
    table.add("bros", 0.5, float("nan"))
    path = write_table(tmp_path / "demo" / "table.md", [table], preamble="Command: `x`")
    expected = ("Command: `x`\n\n### Demo\n\n| policy | latency (s) | share |\n|---|---|---|\n"
                "| fcfs | 1.235 | - |\n| bros | 0.5 | - |\n")
    assert path.read_text() == expected
    assert expected in capsys.readouterr().out
    with pytest.raises(ValueError, match="2 cells, table has 3"):
        table.add("x", 1)


def test_line_plot_writes_a_png(tmp_path) -> None:
    path = line_plot(tmp_path / "plot.png", [LineSeries("a", [1, 2], [3.0, 1.0])], "t", "x", "y", log_y=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_results_dir_is_created_under_the_root(tmp_path) -> None:
    assert results_dir("bros", tmp_path) == tmp_path / "bros"
    assert (tmp_path / "bros").is_dir()


def test_cells_keep_four_significant_digits() -> None:
    assert [format_cell(v) for v in (0.000123456, 12345.6, 7, "x")] == ["0.0001235", "1.235e+04", "7", "x"]


def test_registry_runs_a_benchmark_by_name(monkeypatch, capsys) -> None:
    seen: list[list[str]] = []
    monkeypatch.setitem(bench.BENCHMARKS, "demo", lambda argv: seen.append(argv) or 3)
    assert bench.main(["demo", "--quick"]) == 3
    assert seen == [["--quick"]]
    assert bench.main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out
    assert bench.main(["nope"]) == 2
    with pytest.raises(KeyError, match="unknown benchmark 'nope'"):
        bench.run_benchmark("nope", [])


def test_registered_modules_import_lazily() -> None:
    assert {"bros", "sim"} <= set(bench.BENCHMARKS)
    assert bench.BENCHMARKS["bros"].__qualname__ == "benchmarks.bros.main"


@pytest.mark.parametrize(("error", "line"), [
    (FileNotFoundError(2, "No such file", "/data/trace.csv"),
     "forethought bench demo: /data/trace.csv is missing; the public traces are read from ../shared/data beside "
     "the checkout: point FORETHOUGHT_DATA_DIR (or --data-dir) at a copy"),
    (MissingPrerequisite("a model is not installed: `pip install x`"),
     "forethought bench demo: a model is not installed: `pip install x`"),
], ids=["trace", "prerequisite"])
def test_a_missing_prerequisite_is_one_line_and_status_2(monkeypatch, capsys, error: Exception, line: str) -> None:
    def needs_it(argv: list[str]) -> int:
        raise error

    monkeypatch.setitem(bench.BENCHMARKS, "demo", needs_it)
    assert bench.main(["demo"]) == 2
    assert capsys.readouterr().err == line + "\n"
