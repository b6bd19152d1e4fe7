"""Benchmarks by name: ``forethought bench <name> [args]`` runs ``BENCHMARKS[name](args)``.

Each benchmark is a module ``benchmarks.<name>`` with ``main(argv: list[str]) -> int`` that writes a
Markdown table and PNG plots under ``benchmarks/results/<name>/`` (see ``benchmarks.report``) and prints
the table. Modules are imported only when their benchmark runs, so listing them stays fast.
Adding a benchmark is one line in ``BENCHMARKS``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

from forethought.config import MissingPrerequisite

BenchmarkMain = Callable[[list[str]], int]


def lazy_main(module: str) -> BenchmarkMain:
    """``module.main``, imported on the first call."""

    def run(argv: list[str]) -> int:
        return int(importlib.import_module(module).main(argv))

    run.__qualname__ = f"{module}.main"
    return run


BENCHMARKS: dict[str, BenchmarkMain] = {
    "bros": lazy_main("benchmarks.bros"),
    "e2": lazy_main("benchmarks.e2"),
    "hermes": lazy_main("benchmarks.hermes"),
    "http": lazy_main("benchmarks.http_front"),
    "overload": lazy_main("benchmarks.overload"),
    "placement": lazy_main("benchmarks.placement"),
    "rank-refresh": lazy_main("benchmarks.rank_refresh"),
    "router-memory": lazy_main("benchmarks.router_memory"),
    "rt-arrivals": lazy_main("benchmarks.rt_arrivals"),
    "samullm": lazy_main("benchmarks.samullm"),
    "ssjf": lazy_main("benchmarks.ssjf"),
    "sim": lazy_main("benchmarks.sim_speed"),
    "worker-overhead": lazy_main("benchmarks.worker_overhead"),
}


def prerequisite_message(name: str, error: Exception) -> str:
    """One line for a missing prerequisite: what is missing and how to provide it."""
    if isinstance(error, FileNotFoundError):
        return (f"forethought bench {name}: {error.filename or error} is missing; the public traces are read from "
                "../shared/data beside the checkout: point FORETHOUGHT_DATA_DIR (or --data-dir) at a copy")
    return f"forethought bench {name}: {error}"


def run_benchmark(name: str, argv: list[str]) -> int:
    """Runs benchmark ``name`` with its own arguments; returns its exit status."""
    if name not in BENCHMARKS:
        raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}")
    return BENCHMARKS[name](argv)


def main(argv: list[str] | None = None) -> int:
    """The ``forethought bench`` command: ``<name> [args]``, or ``--help`` for the list."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: forethought bench <name> [--help | benchmark arguments]\n\nbenchmarks:")
        for name in sorted(BENCHMARKS):
            print(f"  {name}")
        return 0 if args else 2
    if args[0] not in BENCHMARKS:
        print(f"unknown benchmark {args[0]!r}; known: {', '.join(sorted(BENCHMARKS))}", file=sys.stderr)
        return 2
    try:
        return run_benchmark(args[0], args[1:])
    except (MissingPrerequisite, FileNotFoundError) as error:
        print(prerequisite_message(args[0], error), file=sys.stderr)
        return 2
