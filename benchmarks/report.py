"""How every benchmark reports: a Markdown table, PNG plots and progress bars, under ``benchmarks/results/<name>/``.

Benchmarks build a ``ResultTable``, write it with ``write_table`` (which also prints it) and draw
``LineSeries`` with ``line_plot``. Plots use matplotlib's Agg backend, so no display is needed.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from forethought.arguments import output_folder
from tqdm import tqdm

RESULTS_ROOT = Path(__file__).resolve().parent / "results"
"""``benchmarks/results`` in the checkout, wherever the command runs from."""

Cell = str | int | float | None
T = TypeVar("T")


def results_dir(name: str, root: str | Path | None = None) -> Path:
    """``<root>/<name>`` (default ``benchmarks/results/<name>``), created if missing."""
    directory = Path(root) / name if root is not None else RESULTS_ROOT / name
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def add_output_argument(parser: argparse.ArgumentParser, name: str) -> None:
    """Adds ``--out DIR``: where the benchmark writes its table and plots."""
    parser.add_argument("--out", type=output_folder, default=RESULTS_ROOT / name,
                        help=f"output directory (default: {RESULTS_ROOT / name})")


def format_cell(value: Cell) -> str:
    """Numbers to at most four significant digits; None and NaN as a dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


@dataclass
class ResultTable:
    """Rows of a results table; ``title`` becomes a heading above it."""

    headers: Sequence[str]
    rows: list[Sequence[Cell]] = field(default_factory=list)
    title: str = ""

    def add(self, *cells: Cell) -> None:
        if len(cells) != len(self.headers):
            raise ValueError(f"row has {len(cells)} cells, table has {len(self.headers)} columns")
        self.rows.append(cells)

    def to_markdown(self) -> str:
        lines = [f"### {self.title}", ""] if self.title else []
        lines.append("| " + " | ".join(self.headers) + " |")
        lines.append("|" + "|".join("---" for _ in self.headers) + "|")
        lines.extend("| " + " | ".join(format_cell(cell) for cell in row) + " |" for row in self.rows)
        return "\n".join(lines) + "\n"


def write_table(path: str | Path, tables: Sequence[ResultTable], preamble: str = "") -> Path:
    """Writes the tables as one Markdown file, prints it, and returns its path."""
    text = (preamble.rstrip() + "\n\n" if preamble else "") + "\n".join(t.to_markdown() for t in tables)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(text)
    return path


@dataclass(frozen=True)
class LineSeries:
    """One line of a plot: a label and its points."""

    label: str
    x: Sequence[float]
    y: Sequence[float]


def line_plot(path: str | Path, series: Sequence[LineSeries], title: str, xlabel: str, ylabel: str,
              log_y: bool = False) -> Path:
    """Draws the series as one line chart with markers and saves it as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(6.0, 4.0), dpi=110)
    for line in series:
        axes.plot(line.x, line.y, marker="o", label=line.label)
    axes.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if log_y:
        axes.set_yscale("log")
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    pyplot.close(figure)
    return path


def progress(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """``items`` with a progress bar on stderr."""
    yield from tqdm(items, desc=description, total=total, unit="run", leave=False)
