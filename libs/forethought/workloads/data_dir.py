"""Where the public traces live: ``../shared/data`` beside the repository unless told otherwise.

Trace files are never copied into the repository; loaders take a path and fall back to this directory.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "FORETHOUGHT_DATA_DIR"


def default_data_dir() -> Path:
    """``$FORETHOUGHT_DATA_DIR``, else ``../shared/data`` relative to the source checkout (or the cwd)."""
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override)
    checkout = Path(__file__).resolve().parents[3]
    # An installed wheel has no checkout around it: then the working directory is the repository root.
    root = checkout if (checkout / "pyproject.toml").is_file() else Path.cwd()
    return (root / ".." / "shared" / "data").resolve()
