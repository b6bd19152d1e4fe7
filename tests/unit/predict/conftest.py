from __future__ import annotations

from pathlib import Path

import pytest
from forethought.predict import Predictor


@pytest.fixture
def predictor(quick_artifact: Path, tmp_path: Path) -> Predictor:
    return Predictor.load(quick_artifact, observations_path=tmp_path / "observations.jsonl")


@pytest.fixture
def unread_castillo_file(tmp_path: Path) -> Path:
    """A CASTILLO file that exists, for commands whose flags are refused before it is read."""
    path = tmp_path / "pairs.jsonl.gz"
    path.touch()
    return path
