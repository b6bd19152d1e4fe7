"""Where Forethought keeps what it builds once per machine: converted models and tokenizers, the
trained predictor, the launcher's state. ``$FORETHOUGHT_CACHE`` moves all of it."""

from __future__ import annotations

import json
import os
from pathlib import Path

CACHE_ROOT = Path(os.environ.get("FORETHOUGHT_CACHE", Path.home() / ".cache" / "forethought"))
PREDICTOR_DIR = CACHE_ROOT / "predictor"
"""The trained output-length predictor (``forethought train-predictor``)."""
UP_STATE_FILE = Path(os.environ.get("FORETHOUGHT_STATE_DIR", CACHE_ROOT)) / "up.json"
"""The addresses of what ``forethought up`` started, while it runs (``$FORETHOUGHT_STATE_DIR`` moves it)."""


def started_services(state_file: Path = UP_STATE_FILE) -> dict[str, str]:
    """What the running ``forethought up`` started, service -> address; empty when none runs, or when its
    state file cannot be read (a half-written or foreign file is not worth a traceback: the commands fall
    back to the default ports)."""
    try:
        services = json.loads(state_file.read_text())["services"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {str(name): str(address) for name, address in services.items()} if isinstance(services, dict) else {}
