"""The package's import floors (docs/architecture.md#import-floors): a module imports only from lower floors.

Read from the source with ``ast``, so nothing is imported. A unit is a top-level package or module of
``forethought``; imports inside one unit are free, imports between two units on one floor are not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "libs" / "forethought"

FLOORS: tuple[tuple[str, ...], ...] = (
    ("domain", "config", "cache", "v1"),  # ground: the shared nouns, settings, paths, the wire contract
    ("engine", "prefix", "queueing", "routing", "workloads", "tokenize", "telemetry", "cluster", "documents", "arguments", "access"),
    ("costmodel", "scheduling", "models", "predict", "rpc"),
    ("backends", "sim", "demand"),
    ("prewarm", "planner", "appsim"),
    ("services",),
    ("launcher", "client"),
    ("application_runner", "planner_runner", "calibrate_runner"),
    ("cli",),
)
FLOOR_OF = {unit: level for level, units in enumerate(FLOORS) for unit in units}


def unit_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def imported_units(path: Path) -> set[str]:
    """The ``forethought`` units that ``path`` imports, at module level or inside functions."""
    units = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        units.update(name.split(".")[1] for name in names if name.startswith("forethought."))
    return units


def sources() -> list[Path]:
    """Every module but the generated contract and the package's own ``__init__`` (which imports nothing)."""
    return sorted(path for path in PACKAGE.rglob("*.py") if unit_of(path) not in ("v1", "__init__"))


def test_every_unit_has_a_floor() -> None:
    on_disk = {unit_of(path) for path in PACKAGE.rglob("*.py")} - {"__init__"}
    assert on_disk == set(FLOOR_OF), "add new packages to FLOORS (and to docs/architecture.md)"


@pytest.mark.parametrize("path", sources(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_a_module_imports_only_lower_floors(path: Path) -> None:
    unit = unit_of(path)
    upward = sorted(other for other in imported_units(path) - {unit} if FLOOR_OF[other] >= FLOOR_OF[unit])
    assert not upward, f"{unit} (floor {FLOOR_OF[unit]}) imports {upward} from its own floor or above"


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text("def f():\n    from forethought.services.worker.shell import build\n")
    assert imported_units(module) == {"services"}
