"""SmolLM2 is converted from its package's GGUF once, into a complete Hugging Face folder."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from forethought.models import SMOLLM2_NAME, prepare_smollm2


@pytest.mark.slow
def test_conversion_writes_a_complete_folder_once_and_replaces_an_interrupted_one(tmp_path: Path) -> None:
    interrupted = tmp_path / SMOLLM2_NAME
    interrupted.mkdir()
    (interrupted / "config.json").write_text("{}")  # no completion marker: a write that never finished
    folder = prepare_smollm2(tmp_path, dtype="float32")
    assert folder == interrupted
    assert json.loads((folder / "config.json").read_text())["model_type"] == "llama"
    assert (folder / "model.safetensors").stat().st_size > 100_000_000
    assert (folder / ".forethought-prepared").read_text() == "source=SmolLM2-135M-Instruct.Q4_1.gguf\ndtype=float32\n"
    assert "chat_template" in (folder / "tokenizer_config.json").read_text() or (folder / "chat_template.jinja").is_file()
    started = time.monotonic()
    assert prepare_smollm2(tmp_path) == folder
    assert time.monotonic() - started < 1.0  # prepared: nothing is converted again
    assert [path.name for path in tmp_path.iterdir()] == [SMOLLM2_NAME]  # no staging folder left behind
