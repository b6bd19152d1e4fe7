from __future__ import annotations

from pathlib import Path

import pytest
from forethought.predict import Predictor


@pytest.fixture
def predictor(quick_artifact: Path, tmp_path: Path) -> Predictor:
    return Predictor.load(quick_artifact, observations_path=tmp_path / "observations.jsonl")
