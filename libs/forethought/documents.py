"""Reading the files users write (application graphs, planner jobs): YAML or JSON, one rule for both."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from forethought.domain import InvalidField, require

SUFFIXES = (".yaml", ".yml", ".json")


def read_document(path: str | Path) -> object:
    """The parsed content of ``path`` (``.yaml``, ``.yml`` or ``.json``); InvalidField("path", ...) when it cannot be."""
    path = Path(path)
    require(path.suffix in SUFFIXES, "path", f"{path.name}: must end in .yaml, .yml or .json")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise InvalidField("path", f"{path.name}: not UTF-8 text ({error.reason} at byte {error.start})") from error
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise InvalidField("path", f"{path.name}: not valid {path.suffix[1:].upper()}: {error}") from error
