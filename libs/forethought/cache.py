"""Where Forethought keeps what it builds once per machine: converted models and tokenizers, the
trained predictor, the launcher's state. ``$FORETHOUGHT_CACHE`` moves all of it."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ROOT = Path(os.environ.get("FORETHOUGHT_CACHE", Path.home() / ".cache" / "forethought"))
PREDICTOR_DIR = CACHE_ROOT / "predictor"
"""The trained output-length predictor (``forethought train-predictor``)."""
UP_STATE_FILE = Path(os.environ.get("FORETHOUGHT_STATE_DIR", CACHE_ROOT)) / "up.json"
"""The addresses of what ``forethought up`` started, while it runs (``$FORETHOUGHT_STATE_DIR`` moves it)."""
