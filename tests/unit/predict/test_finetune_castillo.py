"""Phase 1 on CASTILLO pairs: the fine-tuned backbone, its ranking term, and the int8 delta it ships as."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from forethought.predict import Predictor
from forethought.predict.artifact import DELTA_FILE, WORDS_FILE, BackboneSource, Forecaster, float_backbone
from forethought.predict.castillo import castillo_splits, load_pairs
from forethought.predict.evaluate import OVERALL
from forethought.predict.finetune_castillo import PHASE1_HEAD, FinetuneConfig, finetune, phase1_rows, starting_layers
from forethought.predict.finetune_castillo import main as finetune_main
from forethought.predict.proxy import first_layers, packaged_backbone_dir, with_packaged_layers
from forethought.predict.train_castillo import CastilloConfig, pairwise_rank_loss, train_castillo
from safetensors.torch import load_file

TOPICS = ["rivers", "bread", "chess", "volcanoes", "jazz", "bees", "tides", "glass"]


def test_the_ranking_term_charges_pairs_of_one_model_in_the_wrong_order() -> None:
    log_means = torch.tensor([5.0, 3.0, 5.0, 3.0])
    groups = torch.tensor([0, 0, 1, 1])
    right = pairwise_rank_loss(torch.tensor([9.0, 1.0, 9.0, 1.0]), log_means, groups, margin=0.1)
    wrong = pairwise_rank_loss(torch.tensor([1.0, 9.0, 1.0, 9.0]), log_means, groups, margin=0.1)
    assert right < 0.001 < 7.9 < wrong
    # across models nothing is ordered: model 1's long pair may sit below model 0's short one
    across = pairwise_rank_loss(torch.tensor([9.0, 1.0, 0.5, 0.0]), log_means, groups, margin=0.1)
    softplus = torch.nn.functional.softplus
    assert across == pytest.approx(float(softplus(torch.tensor(-0.5)) + softplus(torch.tensor(-8.0))) / 2)
    # pairs closer than the margin are not ordered
    assert float(pairwise_rank_loss(torch.tensor([0.0, 1.0]), torch.tensor([5.0, 5.05]), torch.tensor([0, 0]), 0.1)) == 0.0


@pytest.fixture(scope="module")
def castillo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Essays answer 8x longer than lists; model "long" 4x longer than "short"."""
    rows = []
    for index in range(48):
        kind, base = ("essay", 160) if index % 2 else ("list", 20)
        prompt = f"Write a {kind} about {TOPICS[index % len(TOPICS)]} number {index}."
        for model, scale in (("short", 1), ("long", 4)):
            rows.append({"split": "validate" if index >= 36 else "train", "prompt_id": str(index), "model": model,
                         "prompt_text": prompt, "output_sizes": [base * scale + offset for offset in range(10)]})
    path = tmp_path_factory.mktemp("castillo") / "pairs.jsonl.gz"
    with gzip.open(path, "wt") as stream:
        stream.writelines(json.dumps(row) + "\n" for row in rows)
    return path


def test_fine_tuning_changes_the_encoder_only_and_ships_as_an_int8_delta(castillo_file: Path, tmp_path: Path) -> None:
    from transformers import AutoModel

    lines: list[str] = []
    config = FinetuneConfig(max_tokens=16, epochs=1, batch_prompts=8, head_hidden=16, holdout_share=0.2, threads=1)
    record = finetune(castillo_file, tmp_path / "backbone", config, log=lines.append)
    assert record["best_epoch"] == 1 and json.loads(lines[0])["epoch"] == 0
    packaged = AutoModel.from_pretrained(str(packaged_backbone_dir())).state_dict()
    tuned = AutoModel.from_pretrained(str(tmp_path / "backbone")).state_dict()
    word = "embeddings.word_embeddings.weight"
    assert torch.equal(tuned[word], packaged[word])
    assert not torch.equal(tuned["encoder.layer.5.output.dense.weight"], packaged["encoder.layer.5.output.dense.weight"])
    # phase 1 scored alone, with its saved head, on the scored validate pairs: essays already rank above lists
    assert (tmp_path / "backbone" / PHASE1_HEAD).is_file()
    rows = phase1_rows(tmp_path / "backbone", castillo_file, config)
    scored = castillo_splits(load_pairs(castillo_file), config.validate_train_share, config.holdout_share)["scored"]
    overall, ceiling = rows[OVERALL]
    assert set(rows) == {"short", "long", OVERALL} and overall.pairs == len(scored) > 0
    assert 0.5 < overall.tau_pair_mean < ceiling.tau_pair_mean == pytest.approx(1.0)
    # a further run starts from that backbone (a fresh head with the same seed scores it differently)
    further = finetune(castillo_file, tmp_path / "further", replace(config, init_backbone=str(tmp_path / "backbone")), log=lines.append)
    assert further["epochs"][0]["held_out_l1"] != record["epochs"][0]["held_out_l1"]

    head_config = CastilloConfig(max_tokens=16, head_hidden=16, epochs=60, patience=60, holdout_share=0.2, batch_size=32,
                                 backbone_int8=True, backbone_dir=str(tmp_path / "backbone"))
    trained, _ = train_castillo(castillo_file, tmp_path / "artifact", head_config, embedding_cache=None, progress=False)
    assert trained.config.backbone is BackboneSource.DELTA
    files = sorted(path.name for path in (tmp_path / "artifact").iterdir())
    assert files == [DELTA_FILE, "calibration.json", "config.json", "head.safetensors", WORDS_FILE]
    assert word not in load_file(tmp_path / "artifact" / DELTA_FILE)
    prompts = ["Write a essay about owls number 900.", "Write a list about owls number 901."]
    loaded = Forecaster.load(tmp_path / "artifact")
    states = trained.embed(prompts)
    assert torch.equal(torch.as_tensor(states), torch.as_tensor(loaded.embed(prompts)))  # the int8 weights exactly as served
    essay, listing = Predictor.load(tmp_path / "artifact").predict(prompts, models=["long", "long"])
    assert essay.mean > listing.mean
    # a later head fitting reuses the artifact's int8 backbone as it is, and its phase-1 record
    reused = replace(head_config, backbone_dir=str(tmp_path / "artifact"))
    again, _ = train_castillo(castillo_file, tmp_path / "again", reused, embedding_cache=None, progress=False)
    assert torch.equal(torch.as_tensor(again.embed(prompts)), torch.as_tensor(states))
    assert again.config.training["finetune"] == trained.config.training["finetune"]
    with pytest.raises(ValueError, match="reused as int8 only"):
        train_castillo(castillo_file, tmp_path / "float", replace(reused, backbone_int8=False), embedding_cache=None, progress=False)
    # the backbone cut to its first layers: the delta holds those alone, and the artifact cuts the packaged
    # MiniLM the same way on load
    cut, _ = train_castillo(castillo_file, tmp_path / "cut", replace(head_config, backbone_layers=2), embedding_cache=None, progress=False)
    assert cut.config.backbone_layers == 2 and trained.config.backbone_layers == 6
    assert not any(name.startswith("encoder.layer.2.") for name in load_file(tmp_path / "cut" / DELTA_FILE))
    reloaded = Forecaster.load(tmp_path / "cut")
    assert len(reloaded.model.backbone.encoder.layer) == 2
    assert torch.equal(torch.as_tensor(reloaded.embed(prompts)), torch.as_tensor(cut.embed(prompts)))
    assert not torch.equal(torch.as_tensor(cut.embed(prompts)), torch.as_tensor(states))
    # phase 1 continues from that artifact: its int8 weights dequantized, and with train_layers only the
    # last layer (and a fresh head) learns
    floats = float_backbone(tmp_path / "cut").state_dict()
    delta = load_file(tmp_path / "cut" / DELTA_FILE)
    dense = "encoder.layer.1.output.dense"
    scale, zero_point = float(delta[f"{dense}.weight_scale"][0]), int(delta[f"{dense}.weight_zero_point"][0])
    assert torch.equal(floats[f"{dense}.weight"], (delta[f"{dense}.weight_int8"].float() - zero_point) * scale)
    finetune(castillo_file, tmp_path / "top", replace(config, init_backbone=str(tmp_path / "cut"), train_layers=1), log=lines.append)
    top = AutoModel.from_pretrained(str(tmp_path / "top")).state_dict()
    assert len({name.split(".")[2] for name in top if name.startswith("encoder.layer.")}) == 2
    below = [name for name in floats if not name.startswith("encoder.layer.1.")]
    assert below and all(torch.equal(top[name], floats[name]) for name in below)
    assert not torch.equal(top[f"{dense}.weight"], floats[f"{dense}.weight"])
    with pytest.raises(ValueError, match="train_layers must be 1..2"):
        finetune(castillo_file, tmp_path / "none", replace(config, init_backbone=str(tmp_path / "cut"), train_layers=3), log=lines.append)
    # or grows it by the packaged MiniLM's next layer, trained alone over the artifact's two, and records
    # how the artifact it starts from was trained
    grown_config = replace(config, init_backbone=str(tmp_path / "cut"), backbone_layers=3, train_layers=1)
    grown = finetune(castillo_file, tmp_path / "grown", grown_config, log=lines.append)
    grown_state = AutoModel.from_pretrained(str(tmp_path / "grown")).state_dict()
    assert {name.split(".")[2] for name in grown_state if name.startswith("encoder.layer.")} == {"0", "1", "2"}
    assert all(torch.equal(grown_state[name], floats[name]) for name in floats)
    third = "encoder.layer.2.output.dense.weight"
    assert not torch.equal(grown_state[third], packaged[third])
    assert grown["init_training"] == cut.config.training and grown["init_training"]["backbone_layers"] == 2
    # the command refuses that before training, from the artifact's own layer count
    assert starting_layers(tmp_path / "cut") == 2 and starting_layers(tmp_path / "top") == 2 and starting_layers(None) == 6
    with pytest.raises(SystemExit, match="2"):
        finetune_main(["--castillo", str(castillo_file), "--out", str(tmp_path / "none"), "--init-backbone", str(tmp_path / "cut"),
                       "--train-layers", "3"])
    assert not (tmp_path / "none").exists()


def test_a_backbone_keeps_between_one_layer_and_all_of_them() -> None:
    from transformers import AutoModel

    backbone = AutoModel.from_pretrained(str(packaged_backbone_dir()))
    for layers in (0, 7):
        with pytest.raises(ValueError, match="layers must be 1..6"):
            first_layers(backbone, layers)
    assert len(first_layers(backbone, 3).encoder.layer) == 3 and backbone.config.num_hidden_layers == 3
    # grown back with the packaged MiniLM's own next layers
    packaged = AutoModel.from_pretrained(str(packaged_backbone_dir())).state_dict()
    grown = with_packaged_layers(backbone, 5)
    assert len(grown.encoder.layer) == 5 and grown.config.num_hidden_layers == 5
    assert all(torch.equal(tensor, packaged[name]) for name, tensor in grown.state_dict().items())
    for layers in (2, 7):
        with pytest.raises(ValueError, match="layers must be 5..6"):
            with_packaged_layers(grown, layers)


def test_a_seed_starts_the_fresh_head_the_same_whatever_drew_before(castillo_file: Path, tmp_path: Path) -> None:
    config = FinetuneConfig(max_tokens=16, epochs=0, batch_prompts=8, head_hidden=16, holdout_share=0.2, threads=1)
    first = finetune(castillo_file, tmp_path / "first", config, log=lambda line: None)
    torch.rand(1000)
    again = finetune(castillo_file, tmp_path / "again", config, log=lambda line: None)
    assert again["epochs"][0]["held_out_l1"] == first["epochs"][0]["held_out_l1"]


@pytest.mark.parametrize(("flags", "message"), [
    (["--train-layers", "-1"], "--train-layers must be 0 (all) or 1..6 (the layers kept), got -1"),
    (["--backbone-layers", "4", "--train-layers", "5"], "--train-layers must be 0 (all) or 1..4 (the layers kept), got 5"),
    (["--backbone-layers", "7"],
     "--backbone-layers must be 0 (all) or 1..6 (past the starting backbone's 6, the packaged MiniLM's next layers), got 7"),
    (["--init-backbone", "/nonexistent"], "--init-backbone must be a folder this command wrote or a predictor artifact, got /nonexistent"),
    (["--rank-weight", "-0.5"], "--rank-weight must be 0 or more, got -0.5"),
])
def test_layer_flags_out_of_range_are_refused_naming_the_flag(flags: list[str], message: str, tmp_path: Path,
                                                              unread_castillo_file: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        finetune_main(["--castillo", str(unread_castillo_file), "--out", str(tmp_path / "out"), *flags])
    assert refused.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
