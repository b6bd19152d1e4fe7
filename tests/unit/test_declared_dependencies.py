"""Every third-party package that the code, the benchmarks and the tests import is declared directly in
pyproject.toml: a package that arrives only through another one works on a developer's machine and
breaks a fresh install the day that other package stops bringing it."""

from __future__ import annotations

import ast
import os
import re
import sys
import tomllib
from functools import cache
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("libs", "benchmarks", "tests", "scripts")
FIRST_PARTY = {"forethought", "benchmarks", "tests", "conftest"}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    return {normalized(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group()) for requirement in requirements}


def guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """An import inside ``try: ... except ImportError`` is optional by design."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Try) and any(
            isinstance(handler.type, ast.Name) and handler.type.id in ("ImportError", "ModuleNotFoundError")
            for handler in node.handlers):
            return True
    return False


def imported_modules(path: Path) -> set[tuple[str, ...]]:
    """Each absolute import of ``path`` as the dotted names that may own it, most specific first."""
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    found: set[tuple[str, ...]] = set()
    for node in ast.walk(tree):
        if guarded(node, parents):
            continue
        if isinstance(node, ast.Import):
            found.update((alias.name,) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.update((f"{node.module}.{alias.name}", node.module) for alias in node.names)
    return {names for names in found if names[-1].partition(".")[0] not in FIRST_PARTY | set(sys.stdlib_module_names)}


@cache
def file_owners() -> dict[str, str]:
    """Installed Python files -> the distribution whose RECORD lists them (read as text: fast)."""
    owners = {}
    for distribution in metadata.distributions():
        base, name = str(distribution.locate_file("")), normalized(distribution.metadata["Name"])
        for line in (distribution.read_text("RECORD") or "").splitlines():
            file = line.partition(",")[0]
            if file.endswith(".py"):
                owners[os.path.normpath(os.path.join(base, file))] = name
    return owners


def module_file(dotted: str) -> str | None:
    """The file of the package or module that owns ``dotted``, found without importing anything: the
    top-level package, or inside a namespace package (``opentelemetry``, ``google``) the first level
    that has one."""
    first, *rest = dotted.split(".")
    spec = find_spec(first)
    if spec is None or spec.origin is not None:
        return spec.origin if spec is not None and spec.origin not in ("built-in", "frozen") else None
    locations = [Path(location) for location in spec.submodule_search_locations or ()]
    for part in rest:
        for location in locations:
            for candidate in (location / part / "__init__.py", location / f"{part}.py"):
                if candidate.is_file():
                    return str(candidate)
        locations = [location / part for location in locations if (location / part).is_dir()]
    return None


def owner_of(names: tuple[str, ...]) -> str | None:
    """The distribution whose files hold the first of ``names`` that is a module with a file."""
    origin = next(filter(None, map(module_file, names)), None)
    return file_owners().get(os.path.normpath(origin)) if origin else None


def test_every_imported_package_is_declared_directly() -> None:
    declared = declared_distributions()
    problems = set()
    for source in SOURCES:
        for path in (ROOT / source).rglob("*.py"):
            for names in imported_modules(path):
                owner = owner_of(names)
                if owner is None:
                    problems.add(f"{names[-1]} (imported in {path.relative_to(ROOT)}): not installed by scripts/install")
                elif owner not in declared:
                    problems.add(f"{names[-1]} (imported in {path.relative_to(ROOT)}): comes from {owner}, "
                                 "which pyproject.toml does not declare")
    assert not problems, "\n".join(sorted(problems))


def test_the_check_sees_an_undeclared_package(tmp_path: Path) -> None:
    # pytest's own dependency: installed here, declared nowhere by this project.
    module = tmp_path / "uses_pluggy.py"
    module.write_text("import pluggy\nfrom opentelemetry import trace\n")
    imports = imported_modules(module)
    assert owner_of(("pluggy",)) == "pluggy" and "pluggy" not in declared_distributions()
    assert owner_of(("opentelemetry.trace", "opentelemetry")) == "opentelemetry-api"
    assert imports == {("pluggy",), ("opentelemetry.trace", "opentelemetry")}
