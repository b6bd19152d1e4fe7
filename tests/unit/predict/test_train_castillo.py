from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from forethought.predict import Predictor
from forethought.predict.proxy import packaged_backbone_dir
from forethought.predict.served_models import ANY_MODEL
from forethought.predict.shipped import SHIPPED_DIR
from forethought.predict.train_castillo import CastilloConfig, PairRows, fit_pair_head, train_castillo

TOPICS = ["rivers", "bread", "chess", "volcanoes", "jazz", "bees", "tides", "glass", "owls", "maps"]


@pytest.fixture(scope="module")
def model_aware(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model-aware predictor trained on pairs where "long" answers 4x longer than "short", and both
    answer "essay" prompts 8x longer than "list" prompts."""
    rows = []
    for index in range(80):
        kind, base = ("essay", 160) if index % 2 else ("list", 20)
        prompt = f"Write a {kind} about {TOPICS[index % len(TOPICS)]} number {index}."
        for model, scale in (("short", 1), ("long", 4)):
            sizes = [base * scale + offset for offset in range(0, 10)]
            rows.append({"split": "validate" if index >= 60 else "train", "prompt_id": str(index), "model": model,
                         "prompt_text": prompt, "output_sizes": sizes})
    folder = tmp_path_factory.mktemp("castillo")
    path = folder / "pairs.jsonl.gz"
    with gzip.open(path, "wt") as stream:
        stream.writelines(json.dumps(row) + "\n" for row in rows)
    config = CastilloConfig(max_tokens=32, head_hidden=32, epochs=150, patience=150, holdout_share=0.2, batch_size=32)
    train_castillo(path, folder / "model", config, embedding_cache=None, progress=False)
    return folder / "model"


def test_the_served_model_selects_what_the_head_learned_of_it(model_aware: Path) -> None:
    config = json.loads((model_aware / "config.json").read_text())
    assert config["models"] == ["long", "short"] and config["format"] == 4
    assert set(config["metrics"]["castillo_validate"]) == {"long", "short", "mean over models"}
    predictor = Predictor.load(model_aware)
    prompt = "Write a essay about bees number 999."
    short, long = predictor.predict([prompt, prompt], models=["short", "long"])
    assert 2.5 < long.mean / short.mean < 6
    # each known model's bucket edges are its own (SSJF's p25/p50/p75/p99 of its lengths)
    assert long.bucket_edges != short.bucket_edges
    essay, listing = predictor.predict([prompt, "Write a list about bees number 999."], models=["long", "long"])
    assert essay.mean > 2 * listing.mean


def test_an_unseen_model_is_calibrated_online_and_the_calibration_persists(model_aware: Path, tmp_path: Path) -> None:
    path = tmp_path / "observations.jsonl"
    predictor = Predictor.load(model_aware, observations_path=path)
    probe = "Write a list about owls number 500."
    before = predictor.predict([probe], models=["newcomer"])[0].mean
    # the newcomer answers 10x what the model-agnostic forecast says
    for index in range(40):
        prompt = f"Write a {'essay' if index % 2 else 'list'} about maps number {1000 + index}."
        agnostic = predictor.predict([prompt], models=[ANY_MODEL])[0].mean
        predictor.observe(prompt, int(10 * agnostic), model="newcomer")
    after = predictor.predict([probe], models=["newcomer"])[0]
    assert after.mean > 4 * before
    assert after.quantiles[10] <= after.mean <= after.quantiles[90]
    # known models are not moved by the newcomer's lengths
    assert predictor.calibration.count("newcomer") == 40 and predictor.calibration.count("short") == 0
    reloaded = Predictor.load(model_aware, observations_path=path)
    assert reloaded.predict([probe], models=["newcomer"])[0].mean == pytest.approx(after.mean, rel=1e-4)


def test_observations_of_one_model_do_not_answer_another_from_the_length_cache(model_aware: Path) -> None:
    predictor = Predictor.load(model_aware)
    prompt = "Write a essay about jazz number 77."
    predictor.observe(prompt, 5, model="short")
    short, long = predictor.predict([prompt, prompt], models=["short", "long"])
    assert (short.source, short.mean) == ("cache", 5.0)
    assert long.source == "model" and not np.isclose(long.mean, 5.0)


def test_an_int8_backbone_and_a_shorter_window_keep_the_ranking(model_aware: Path, tmp_path: Path) -> None:
    from dataclasses import replace

    import torch
    from forethought.predict.artifact import Forecaster
    from forethought.predict.history import NO_HISTORY

    forecaster = Forecaster.load(model_aware)
    fast = forecaster.with_speed(16, int8=True)
    prompts = [f"Write a {kind} about {topic} number {900 + index}." for index, topic in enumerate(TOPICS) for kind in ("essay", "list")]
    exact = [f.mean for f in forecaster.forecast(prompts, [NO_HISTORY] * len(prompts), ["long"] * len(prompts))]
    quick = [f.mean for f in fast.forecast(prompts, [NO_HISTORY] * len(prompts), ["long"] * len(prompts))]
    assert [a > b for a, b in zip(exact[::2], exact[1::2])] == [a > b for a, b in zip(quick[::2], quick[1::2])]
    # an artifact that says int8 is loaded with its backbone's Linear layers quantized
    saved = replace(forecaster.config, backbone_int8=True)
    Forecaster(forecaster.model, forecaster.tokenizer, saved, forecaster.spread, forecaster.model_spreads,
               forecaster.words).save(tmp_path / "int8")
    loaded = Forecaster.load(tmp_path / "int8")
    modules = list(loaded.model.backbone.modules())
    assert not any(type(module) is torch.nn.Linear for module in modules)
    assert any(isinstance(module, torch.ao.nn.quantized.dynamic.Linear) for module in modules)



def test_an_artifact_that_names_onnx_runtime_forecasts_on_it(model_aware: Path, tmp_path: Path) -> None:
    from dataclasses import replace

    from forethought.predict.artifact import EncoderRuntime, Forecaster, dequantized
    from forethought.predict.history import NO_HISTORY

    on_torch = Forecaster.load(model_aware).with_speed(32, int8=True)
    config = replace(on_torch.config, encoder_runtime=EncoderRuntime.ONNXRUNTIME)
    Forecaster(on_torch.model, on_torch.tokenizer, config, on_torch.spread, on_torch.model_spreads, on_torch.words).save(tmp_path / "onnx")
    assert json.loads((tmp_path / "onnx" / "config.json").read_text())["encoder_runtime"] == "onnxruntime"
    on_onnx = Forecaster.load(tmp_path / "onnx")
    assert on_onnx.config.encoder_runtime is EncoderRuntime.ONNXRUNTIME
    prompts = [f"Write a {kind} about {topic} number {900 + index}." for index, topic in enumerate(TOPICS) for kind in ("essay", "list")]
    threads = torch.get_num_threads()
    torch_means = [f.mean for f in on_torch.forecast(prompts, [NO_HISTORY] * len(prompts), ["long"] * len(prompts))]
    onnx_means = [f.mean for f in on_onnx.forecast(prompts, [NO_HISTORY] * len(prompts), ["long"] * len(prompts))]
    assert torch.get_num_threads() == threads
    # the same network in another runtime's int8 arithmetic: close, not equal, and ranking the same
    assert onnx_means != torch_means
    assert np.allclose(onnx_means, torch_means, rtol=0.15)
    assert [a > b for a, b in zip(onnx_means[::2], onnx_means[1::2])] == [a > b for a, b in zip(torch_means[::2], torch_means[1::2])]
    # the float network it exports is the int8 one's weights dequantized; the int8 backbone is left as it was
    floats = dequantized(on_torch.model.backbone)
    query = on_torch.model.backbone.encoder.layer[0].attention.self.query
    assert torch.equal(floats.encoder.layer[0].attention.self.query.weight, query.weight().dequantize())
    assert isinstance(query, torch.ao.nn.quantized.dynamic.Linear)
    # onnxruntime runs int8 backbones only
    with pytest.raises(ValueError, match="config.backbone_int8 must be true"):
        Forecaster(on_torch.model, on_torch.tokenizer, replace(config, backbone_int8=False), on_torch.spread,
                   on_torch.model_spreads, on_torch.words)
    (tmp_path / "onnx" / "config.json").write_text(json.dumps(dict(json.loads((tmp_path / "onnx" / "config.json").read_text()),
                                                                     encoder_runtime="tensorrt")))
    with pytest.raises(ValueError, match="'tensorrt' is not a valid EncoderRuntime"):
        Forecaster.load(tmp_path / "onnx")


FILLER = " ".join(["The answer should be careful, clear and correct."] * 12)


def cue_first_pairs(path: Path) -> Path:
    """Pairs whose length cue ("essay" or "list") opens a prompt that goes on for ~120 tokens of filler,
    out of sight of a 16-token window."""
    rows = []
    for index in range(120):
        kind, base = ("essay", 200) if index // len(TOPICS) % 2 else ("list", 20)  # each topic asked both ways
        prompt = f"Write a {kind} about {TOPICS[index % len(TOPICS)]}. {FILLER} Number {index}."
        rows.append({"split": "validate" if index >= 90 else "train", "prompt_id": str(index), "model": "only",
                     "prompt_text": prompt, "output_sizes": [base + offset for offset in range(10)]})
    with gzip.open(path, "wt") as stream:
        stream.writelines(json.dumps(row) + "\n" for row in rows)
    return path


@pytest.mark.parametrize("word_buckets", [0, 4096])
def test_the_word_table_reads_what_the_backbone_window_misses(tmp_path: Path, word_buckets: int) -> None:
    path = cue_first_pairs(tmp_path / "pairs.jsonl.gz")
    # 72 prompts give the table few steps: a faster rate than CASTILLO's thousands need
    config = CastilloConfig(max_tokens=16, head_hidden=16, epochs=100, patience=100, holdout_share=0.2, batch_size=32,
                            word_buckets=word_buckets, word_learning_rate=0.1, validate_train_share=0.0)
    train_castillo(path, tmp_path / "model", config, embedding_cache=None, progress=False)
    predictor = Predictor.load(tmp_path / "model")
    essays = [f"Write a essay about {topic}. {FILLER} Number {500 + index}." for index, topic in enumerate(TOPICS)]
    lists = [essay.replace("a essay", "a list") for essay in essays]
    forecasts = predictor.predict(essays + lists, models=["only"] * 2 * len(TOPICS))
    ratio = np.median([f.mean for f in forecasts[: len(TOPICS)]]) / np.median([f.mean for f in forecasts[len(TOPICS) :]])
    if word_buckets:
        assert ratio > 3  # the answers are 10x apart
    else:
        assert 0.5 < ratio < 2  # the last 16 tokens are the same filler for both


@pytest.mark.parametrize("flag", ["--word-buckets", "--rank-weight"])
def test_a_negative_word_table_size_or_rank_weight_is_refused_naming_the_flag(
        flag: str, tmp_path: Path, unread_castillo_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from forethought.predict.train import main

    with pytest.raises(SystemExit) as refused:
        main(["--castillo", str(unread_castillo_file), flag, "-1", "--out", str(tmp_path / "model")])
    assert refused.value.code == 2
    assert f"{flag} must be 0 or more, got -1" in capsys.readouterr().err
    assert not (tmp_path / "model").exists()


def test_onnx_runtime_without_an_int8_backbone_is_refused_naming_the_flag(tmp_path: Path, unread_castillo_file: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from forethought.predict.train import main

    with pytest.raises(SystemExit) as refused:
        main(["--castillo", str(unread_castillo_file), "--encoder-runtime", "onnxruntime", "--out", str(tmp_path / "model")])
    assert refused.value.code == 2
    assert "--encoder-runtime onnxruntime runs an int8 backbone: add --int8" in capsys.readouterr().err
    assert not (tmp_path / "model").exists()


def _minilm_with_cut_weights(folder: Path) -> Path:
    folder.mkdir()
    shutil.copy(packaged_backbone_dir() / "config.json", folder / "config.json")
    (folder / "model.safetensors").write_bytes((packaged_backbone_dir() / "model.safetensors").read_bytes()[:4096])
    return folder


def _no_model_type(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 384}')
    return folder


@pytest.mark.parametrize(("backbone", "says"), [
    (_minilm_with_cut_weights, "holds neither a predictor nor a fine-tuned MiniLM that loads (SafetensorError"),
    (_no_model_type, "holds neither a predictor nor a fine-tuned MiniLM that loads (ValueError"),
    (lambda folder: folder / "missing", "no such folder"),
], ids=["cut weights", "no model type", "missing"])
def test_a_backbone_folder_that_does_not_load_is_refused_in_one_line_before_the_data_is_read(
        backbone: Callable[[Path], Path], says: str, tmp_path: Path, unread_castillo_file: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from forethought.predict.train import main

    with pytest.raises(SystemExit) as refused:
        main(["--castillo", str(unread_castillo_file), "--backbone", str(backbone(tmp_path / "backbone")),
              "--out", str(tmp_path / "model")])
    assert refused.value.code == 2
    error = capsys.readouterr().err
    assert "--backbone" in error and says in error and "Traceback" not in error
    assert not (tmp_path / "model").exists()


def test_a_predictor_artifact_as_a_float_backbone_is_refused_naming_the_flag(
        tmp_path: Path, unread_castillo_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from forethought.predict.train import main

    with pytest.raises(SystemExit) as refused:
        main(["--castillo", str(unread_castillo_file), "--backbone", str(SHIPPED_DIR), "--out", str(tmp_path / "model")])
    assert refused.value.code == 2
    assert "is a predictor artifact, whose backbone is int8: add --int8" in capsys.readouterr().err


@pytest.mark.parametrize("rank_weight", [0.0, 5.0])
def test_the_ranking_term_orders_pairs_by_mean_answer_where_l1_follows_the_median(rank_weight: float) -> None:
    # pair 0 answers mostly 1 token and twice 100 (median 1, the longer mean); pair 1 always 5
    targets = torch.log1p(torch.tensor([[1.0, 1, 1, 100, 100], [5, 5, 5, 5, 5]]))
    inputs = torch.tensor([[1.0, 0, 1, 0, 0], [0, 1, 1, 0, 0]])  # a prompt column each, then model, any-model, length
    rows = PairRows(inputs, targets, torch.ones_like(targets), [], torch.tensor([0, 0]))
    assert torch.allclose(rows.log_means, targets.mean(dim=1))
    head = torch.nn.Linear(5, 1, bias=False)
    config = CastilloConfig(epochs=400, patience=400, learning_rate=0.05, batch_size=2, any_model_share=0.0, rank_weight=rank_weight)
    weights, _, _ = fit_pair_head(head, None, 1, config, rows, rows)
    head.load_state_dict(weights)
    skewed, steady = head(inputs)[:, 0].tolist()
    assert (skewed > steady) == (rank_weight > 0)


def test_the_speed_table_times_and_scores_each_forward(model_aware: Path) -> None:
    from forethought.predict.artifact import Forecaster
    from forethought.predict.castillo import load_pairs
    from forethought.predict.speed import speed_rows

    pairs = load_pairs(model_aware.parent / "pairs.jsonl.gz", ["validate"])
    threads = torch.get_num_threads()
    rows = speed_rows(Forecaster.load(model_aware), "aware", pairs, [32], timed=6, scored=20)
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    assert [(row[3], row[4]) for row in cells] == [("float32", "torch traced"), ("float32", "torch module"),
                                                   ("int8", "torch traced"), ("int8", "torch module"), ("int8", "onnxruntime")]
    assert all(0 < float(row[5]) <= float(row[6]) for row in cells)
    # each runtime is scored on its own states; all rank essays above lists as the float32 forward does
    taus = [float(row[7]) for row in cells]
    assert taus[0] > 0.5 and taus[2] == taus[3] and abs(taus[4] - taus[2]) < 0.1
    assert torch.get_num_threads() == threads  # the ONNX Runtime forecasts' single torch thread is given back
