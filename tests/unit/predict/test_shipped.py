"""The predictor shipped in the package, and the choice between it and a fine-tuned one."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from forethought.predict import NO_HISTORY, ConversationHistory, Predictor
from forethought.predict.artifact import DELTA_FILE, HEAD_FILE, LEGACY_HEAD_FILE, WORDS_FILE, BackboneSource
from forethought.predict.shipped import SHIPPED_DIR, predictor_folder, resolve_predictor
from forethought.predict.train_castillo import SHIPPED_CASTILLO
from safetensors.torch import load_file

SHORT = "What is the capital of France?"
LONG = ("Write a detailed essay of at least 1500 words on the causes of the First World War, with an "
        "introduction, five sections covering alliances, militarism, imperialism, nationalism and the "
        "assassination in Sarajevo, and a conclusion.")

# Loads whatever the resolver picks in a fresh process, so FORETHOUGHT_CACHE takes effect.
FORECAST_SCRIPT = """
import json, forethought
from forethought.predict import NO_HISTORY, ConversationHistory, Predictor
from forethought.predict.shipped import resolve_predictor
choice = resolve_predictor()
forecasts = Predictor.load(choice.directory).predict(
    [{short!r}, {long!r}, {short!r}, {long!r}],
    [NO_HISTORY, NO_HISTORY, ConversationHistory((40, 25)), ConversationHistory((2600, 3100))])
print(json.dumps({{"directory": str(choice.directory), "description": choice.description,
                  "package": forethought.__file__, "means": [f.mean for f in forecasts]}}))
"""


def test_the_shipped_predictor_loads_with_an_empty_cache_and_ranks_a_long_request_first(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {**os.environ, "FORETHOUGHT_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    script = FORECAST_SCRIPT.format(short=SHORT, long=LONG)
    reply = json.loads(subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True,
                                      text=True, check=True).stdout)
    assert Path(reply["directory"]) == Path(reply["package"]).parent / "predict" / "shipped_head"
    assert reply["description"].startswith(
        f"shipped predictor (MiniLM fine-tuned on CASTILLO, int8; no trained predictor in {cache / 'predictor'}")
    short_alone, long_alone, short_chat, long_chat = reply["means"]
    assert long_alone > 1.5 * short_alone
    assert long_chat > 1.5 * short_chat
    assert not cache.exists()  # loading wrote nothing


def test_the_shipped_artifact_is_a_small_head_and_word_table_on_an_int8_delta_of_the_packaged_backbone() -> None:
    config = json.loads((SHIPPED_DIR / "config.json").read_text())
    assert config["backbone"] == BackboneSource.DELTA.value and config["version"] == 1
    assert sorted(path.name for path in SHIPPED_DIR.iterdir()) == [DELTA_FILE, "calibration.json", "config.json", HEAD_FILE, WORDS_FILE]
    # the word table in float16: a shared column and one per known model
    words = load_file(SHIPPED_DIR / WORDS_FILE)["weights"]
    assert words.dtype == torch.float16 and words.shape == (config["word_buckets"], len(config["models"]) + 1)
    assert (SHIPPED_DIR / HEAD_FILE).stat().st_size < 300_000
    # the fine-tuned encoder's first 5 layers in int8, without the word embeddings it shares with the
    # packaged MiniLM (47 MB)
    assert (SHIPPED_DIR / DELTA_FILE).stat().st_size < 11_000_000
    delta = load_file(SHIPPED_DIR / DELTA_FILE)
    assert not any(name.startswith(("embeddings.word_embeddings", "encoder.layer.5.")) for name in delta)
    assert any(name.startswith("encoder.layer.4.") for name in delta)
    head = load_file(SHIPPED_DIR / HEAD_FILE)
    # text state, history features, one-hot of the 13 CASTILLO models, the any-model slot, prompt length
    assert len(config["models"]) == 13
    assert head["0.weight"].shape == (config["head_hidden"], 384 + 7 + 13 + 2)
    # the last 512 tokens through 5 of MiniLM's 6 layers, int8 on ONNX Runtime (docs/predictor.md, Speed)
    assert config["backbone_int8"] and config["max_tokens"] == 512 and config["backbone_layers"] == 5
    assert config["encoder_runtime"] == "onnxruntime"
    # trained as the shipped configuration says (the ranking term and the runtime among it)
    for name in ("max_tokens", "head_hidden", "backbone_layers", "word_buckets", "rank_weight", "rank_margin", "encoder_runtime"):
        assert config["training"][name] == getattr(SHIPPED_CASTILLO, name), name
    assert set(config["metrics"]["castillo_validate"]) == {*config["models"], "mean over models"}


def test_the_resolver_prefers_a_fine_tuned_predictor_of_the_current_format(quick_artifact: Path) -> None:
    choice = resolve_predictor(fine_tuned=quick_artifact)
    assert choice.directory == quick_artifact
    assert choice.description == f"fine-tuned predictor in {quick_artifact}"


def test_the_resolver_falls_back_to_the_shipped_predictor(quick_artifact: Path, tmp_path: Path) -> None:
    older = tmp_path / "older"
    shutil.copytree(quick_artifact, older)
    config = json.loads((older / "config.json").read_text())
    (older / "config.json").write_text(json.dumps(dict(config, format=1)))
    for fine_tuned, problem in ((tmp_path / "missing", "no trained predictor in"), (older, "has artifact format 1")):
        choice = resolve_predictor(fine_tuned=fine_tuned)
        assert choice.directory == SHIPPED_DIR
        assert problem in choice.description and str(fine_tuned) in choice.description


def test_an_explicit_folder_wins_and_must_hold_a_predictor(quick_artifact: Path, tmp_path: Path) -> None:
    assert resolve_predictor(SHIPPED_DIR, fine_tuned=quick_artifact).description == f"shipped predictor in {SHIPPED_DIR}"
    assert resolve_predictor(quick_artifact, fine_tuned=tmp_path).directory == quick_artifact
    with pytest.raises(ValueError, match=r"no trained predictor in .*nowhere: `forethought train-predictor`"):
        resolve_predictor(tmp_path / "nowhere", fine_tuned=quick_artifact)


def test_a_predictor_flag_names_a_folder_without_one_and_a_cut_one_stops_the_command_in_one_line(
        quick_artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from forethought.predict.evaluate import main as evaluate

    assert predictor_folder(str(quick_artifact)) == quick_artifact
    with pytest.raises(argparse.ArgumentTypeError, match=r"no trained predictor in .*nowhere: `forethought train-predictor`"):
        predictor_folder(str(tmp_path / "nowhere"))
    cut = tmp_path / "cut"
    shutil.copytree(quick_artifact, cut)
    (cut / HEAD_FILE).write_bytes(b"cut short")
    with pytest.raises(SystemExit) as stopped:
        evaluate(["--model", str(cut)])
    assert stopped.value.code == 2
    assert f"--model: the predictor in {cut} does not load (SafetensorError: " in capsys.readouterr().err


def test_an_artifact_with_its_head_as_a_torch_pickle_still_loads(quick_artifact: Path, tmp_path: Path) -> None:
    legacy = tmp_path / "legacy"
    shutil.copytree(quick_artifact, legacy)
    torch.save(load_file(legacy / HEAD_FILE), legacy / LEGACY_HEAD_FILE)
    (legacy / HEAD_FILE).unlink()
    histories = [NO_HISTORY, ConversationHistory((900,))]
    expected = Predictor.load(quick_artifact).predict([SHORT, LONG], histories)
    loaded = Predictor.load(legacy).predict([SHORT, LONG], histories)
    assert np.allclose([f.mean for f in loaded], [f.mean for f in expected])


def test_a_refit_of_the_shipped_predictor_is_written_to_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import forethought.predict.predictor as predictor_module

    monkeypatch.setattr(predictor_module, "PREDICTOR_DIR", tmp_path / "predictor")
    predictor = Predictor.load(SHIPPED_DIR)
    for index in range(10):
        predictor.observe(f"{SHORT} ({index})", 12)
    written = predictor.refit(epochs=2)
    assert written == tmp_path / "shipped_head-v2"
    assert sorted(path.name for path in written.iterdir()) == [DELTA_FILE, "calibration.json", "config.json", HEAD_FILE, WORDS_FILE]
    refitted = Predictor.load(written)
    assert refitted.version == 2
    # the refit fits the head to what the word table leaves; the table itself is kept
    assert torch.equal(refitted.handle.current.words.weights.weight, predictor.handle.current.words.weights.weight)
