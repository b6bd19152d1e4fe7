"""What the deployment checks share: reading the repo's deployment files and parsing a container's
``forethought`` command line the way ``forethought serve NAME`` would, with the container's environment."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from forethought.cli import build_parser
from forethought.config import ServiceSettings, add_arguments, settings_from
from forethought.services import service_spec

REPO = Path(__file__).resolve().parents[3]
COMPOSE_DIR = REPO / "compose"
KUBERNETES_DIR = REPO / "deploy" / "kubernetes"

ParseCommand = Callable[[Sequence[str], Mapping[str, str]], tuple[str, ServiceSettings]]


def parse_command(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[str, ServiceSettings]:
    """(service name, validated settings) of ``forethought ARGV`` run with only ``environ`` set.

    The CLI's parser must accept ``serve NAME``; the service's own settings parser takes the rest, and a
    setting its rules forbid raises ``ConfigError`` naming it, as the service would at start.
    """
    args = build_parser().parse_args(list(argv))
    assert args.command == "serve", f"{list(argv)} does not serve a service"
    spec = service_spec(args.service)
    parser = argparse.ArgumentParser(prog=f"forethought serve {spec.name}", exit_on_error=False)
    add_arguments(parser, spec.settings_type)
    return spec.name, settings_from(spec.settings_type, parser.parse_args(args.rest), environ)


@pytest.fixture
def parse_service_command() -> ParseCommand:
    return parse_command


def string_literals_in_package() -> str:
    """Every Python source of the package as one text, where metric names are looked up."""
    return "\n".join(path.read_text() for path in sorted((REPO / "libs" / "forethought").rglob("*.py")))


def as_mapping(value: Any) -> dict[str, Any]:
    assert isinstance(value, dict), f"expected a mapping, got {value!r}"
    return value
