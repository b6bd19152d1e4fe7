"""Train the model-aware predictor on CASTILLO's multi-model length labels (SSJF section 3.1, phase 2
alone, with the all-models variant's one-hot of the served model in the head's input).

    forethought train-predictor --castillo FILE [--out DIR] [--max-tokens 128] [--shipped]

The packaged MiniLM stays frozen: each distinct prompt is embedded once (mean-pooled, cached on disk under
the cache folder's ``embeddings/``), so training is minutes of head fitting on 2 cores. A pair's 10
answers are its target distribution: the L1 loss against every answer makes the head's output the
conditional median of log1p(length) for that prompt and model. During fitting a share of rows see the
any-model slot instead of their model's one-hot, which makes that slot the model-agnostic forecast an
unseen model starts from. A tenth of the training prompts are held out to stop early and to calibrate
each model's spread.

CASTILLO's train split is incomplete: for some models it holds only the code sets (Gemma 3 4B: Mbpp,
DS1000, BigCodeBench) while validate holds all seven. So by default half of the validate prompts (by a
hash of the prompt id) join training and the other half is scored (the ``--castillo`` table of
``forethought.predict.evaluate``); ``validate_train_share=0`` trains on the train split alone.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from forethought.predict.artifact import (
    BackboneSource,
    Forecaster,
    ForecasterConfig,
    int8_backbone,
    thinned_spread,
)
from forethought.predict.buckets import LengthBuckets
from forethought.predict.castillo import LengthPair, castillo_splits, load_pairs
from forethought.predict.embedding_cache import EmbeddingCache
from forethought.predict.evaluate import OVERALL, castillo_json, castillo_rows, pair_forecasts
from forethought.predict.fitting import torch_threads
from forethought.predict.history import NO_HISTORY
from forethought.predict.metrics import SSJF_EDGE_PERCENTS, format_pair_table
from forethought.predict.proxy import Formulation, Pooling, ProxyLengthModel, packaged_backbone_dir
from forethought.predict.served_models import ANY_MODEL, model_input_width
from forethought.predict.train import EMBEDDINGS_DIR, bucket_log_medians


@dataclass(frozen=True)
class CastilloConfig:
    max_tokens: int = 128
    head_hidden: int = 256
    epochs: int = 200  # an upper bound: early stopping on the held-out prompts ends it
    patience: int = 15
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 256
    any_model_share: float = 0.2  # rows fitted through the any-model slot
    holdout_share: float = 0.1  # training prompts held out for early stopping and calibration
    validate_train_share: float = 0.5  # validate prompts that join training; the rest are scored
    backbone_int8: bool = False  # embed (and later serve) with the backbone's Linear layers in dynamic int8
    # a MiniLM fine-tuned by ``forethought.predict.finetune_castillo`` (phase 1) to fit the head on; empty:
    # the packaged one, frozen. Saved as a delta over the packaged one when int8, else whole
    backbone_dir: str = ""
    # torch threads of the head fitting; on a machine others load, 1 is far faster than 2 (no spinning)
    threads: int = 2
    seed: int = 0


# the predictor the package ships: under 10 ms a forecast on 2 cores (docs/predictor.md, Speed)
SHIPPED_CASTILLO = CastilloConfig(max_tokens=32, backbone_int8=True, head_hidden=128)


def answer_targets(pairs: list[LengthPair]) -> tuple[torch.Tensor, torch.Tensor]:
    """log1p of each pair's answers (rows padded to the most answers) and the mask of real ones."""
    width = max(len(pair.output_sizes) for pair in pairs)
    targets = np.zeros((len(pairs), width), np.float32)
    mask = np.zeros((len(pairs), width), np.float32)
    for row, pair in enumerate(pairs):
        targets[row, : len(pair.output_sizes)] = np.log1p(pair.output_sizes)
        mask[row, : len(pair.output_sizes)] = 1.0
    return torch.as_tensor(targets), torch.as_tensor(mask)


def as_any_model(inputs: torch.Tensor, rows: torch.Tensor, models: int) -> torch.Tensor:
    """``inputs`` with the marked rows' model one-hot moved to the any-model slot (the last ``models + 2``
    columns are the one-hot over ``models``, the any-model slot and the prompt length)."""
    changed = inputs.clone()
    start = inputs.shape[1] - (models + 2)
    changed[rows, start : start + models + 1] = 0.0
    changed[rows, start + models] = 1.0
    return changed


def answer_l1(outputs: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return ((outputs[:, :1] - targets).abs() * mask).sum() / mask.sum()


def fit_pair_head(
    head: torch.nn.Module, models: int, config: CastilloConfig,
    train: tuple[np.ndarray, torch.Tensor, torch.Tensor], validation: tuple[np.ndarray, torch.Tensor, torch.Tensor],
    progress: bool = False,
) -> tuple[dict[str, torch.Tensor], int]:
    """Fit ``head`` to the answers; returns the weights of the epoch with the least held-out loss (the
    mean of the model-aware and the any-model loss) and that epoch."""
    from tqdm import tqdm

    generator = torch.Generator().manual_seed(config.seed)
    torch.manual_seed(config.seed)
    inputs, targets, mask = torch.as_tensor(train[0]), train[1], train[2]
    held_inputs, held_targets, held_mask = torch.as_tensor(validation[0]), validation[1], validation[2]
    held_any = as_any_model(held_inputs, torch.arange(len(held_inputs)), models)
    optimizer = torch.optim.AdamW(head.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    best: tuple[float, int, dict[str, torch.Tensor]] = (float("inf"), 0, {})
    bar = tqdm(range(config.epochs), desc="fitting the head", disable=not progress)
    for epoch in bar:
        head.train()
        for batch in torch.randperm(len(inputs), generator=generator).split(config.batch_size):
            rows = inputs[batch]
            rows = as_any_model(rows, torch.rand(len(rows), generator=generator) < config.any_model_share, models)
            loss = answer_l1(head(rows), targets[batch], mask[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        head.eval()
        with torch.no_grad():
            held = 0.5 * float(answer_l1(head(held_inputs), held_targets, held_mask) + answer_l1(head(held_any), held_targets, held_mask))
        bar.set_postfix(held_out_l1=f"{held:.4f}")
        if held < best[0]:
            best = (held, epoch, {name: tensor.detach().clone() for name, tensor in head.state_dict().items()})
        elif epoch - best[1] >= config.patience:
            break
    return best[2], best[1]


def train_castillo(
    path: Path, out_dir: Path, config: CastilloConfig = CastilloConfig(), embedding_cache: Path | None = EMBEDDINGS_DIR,
    progress: bool = True,
) -> tuple[Forecaster, str]:
    """Train on ``path``'s train split (and a share of validate), score on the rest of validate, save the
    artifact to ``out_dir``; returns the forecaster and the table of the scored pairs."""
    from transformers import AutoModel, AutoTokenizer

    pairs = load_pairs(path)
    splits = castillo_splits(pairs, config.validate_train_share, config.holdout_share)
    fit_pairs, calibration_pairs, validate_pairs = splits["fit"], splits["calibration"], splits["scored"]
    models = tuple(sorted({pair.model for pair in fit_pairs}))
    lengths = np.concatenate([np.asarray(pair.output_sizes, float) for pair in fit_pairs])
    buckets = LengthBuckets(tuple(float(edge) for edge in np.percentile(lengths, SSJF_EDGE_PERCENTS)))
    model_edges = {
        model: tuple(float(edge) for edge in np.percentile(
            np.concatenate([pair.output_sizes for pair in fit_pairs if pair.model == model]), SSJF_EDGE_PERCENTS))
        for model in models
    }
    backbone_dir = packaged_backbone_dir()
    backbone = AutoModel.from_pretrained(config.backbone_dir or str(backbone_dir))
    source = (BackboneSource.DELTA if config.backbone_int8 else BackboneSource.ARTIFACT) if config.backbone_dir else BackboneSource.PACKAGED
    proxy = ProxyLengthModel(int8_backbone(backbone) if config.backbone_int8 else backbone, Formulation.REG_L1,
                             config.head_hidden, Pooling.MEAN, model_input_width(models))
    forecaster_config = ForecasterConfig(
        version=1, formulation=Formulation.REG_L1, max_tokens=config.max_tokens, head_hidden=config.head_hidden,
        bucket_edges=buckets.edges, bucket_log_medians=bucket_log_medians(lengths, buckets),
        backbone=source, pooling=Pooling.MEAN,
        training=dict(asdict(config), data=Path(path).name, fit_pairs=len(fit_pairs), calibration_pairs=len(calibration_pairs),
                      scored_pairs=len(validate_pairs), **finetune_record(config.backbone_dir)),
        models=models, model_bucket_edges=model_edges, history_features=False, backbone_int8=config.backbone_int8,
    )
    base = Forecaster(proxy, AutoTokenizer.from_pretrained(str(backbone_dir)), forecaster_config,
                      thinned_spread(np.ones(1), np.zeros(1)))
    cache = EmbeddingCache.for_backbone(embedding_cache, proxy.backbone, config.max_tokens, Pooling.MEAN.value)
    prompts = list(dict.fromkeys(pair.prompt for pair in pairs))
    states = cache.embed(prompts, base.embed, progress, "embedding prompts")
    row_of = {prompt: row for row, prompt in enumerate(prompts)}

    def inputs_for(chosen: list[LengthPair]) -> np.ndarray:
        texts = [pair.prompt for pair in chosen]
        return base.inputs(states[[row_of[text] for text in texts]], texts, [NO_HISTORY] * len(chosen), [pair.model for pair in chosen])

    fit_inputs, calibration_inputs = inputs_for(fit_pairs), inputs_for(calibration_pairs)
    with torch_threads(min(config.threads, os.cpu_count() or 1)):
        head_state, best_epoch = fit_pair_head(
            proxy.head, len(models), config, (fit_inputs, *answer_targets(fit_pairs)),
            (calibration_inputs, *answer_targets(calibration_pairs)), progress,
        )
    trained = base.with_head(head_state, base.spread, training=dict(forecaster_config.training, best_epoch=best_epoch))
    forecaster = calibrate(trained, calibration_pairs, calibration_inputs, len(models))
    points, p90s = pair_forecasts(forecaster, validate_pairs, embedding_cache)
    rows = castillo_rows(validate_pairs, points, p90s)
    any_points, any_p90s = pair_forecasts(forecaster, validate_pairs, embedding_cache, as_model=ANY_MODEL)
    any_rows = castillo_rows(validate_pairs, any_points, any_p90s)
    forecaster.config.metrics = {
        "castillo_validate": castillo_json(rows, Path(path), "model-aware head")["models"],
        "castillo_validate_any_model": castillo_json(any_rows, Path(path), "any-model slot")["models"][OVERALL],
    }
    forecaster.save(out_dir)
    table = format_pair_table({**rows, "mean over models, any-model slot (unseen model, uncalibrated)": any_rows[OVERALL]})
    return forecaster, table


def finetune_record(backbone_dir: str) -> dict[str, Any]:
    """The phase-1 run's settings and held-out losses by epoch (``finetune.json``), its folder by name."""
    if not backbone_dir:
        return {}
    record = json.loads((Path(backbone_dir) / "finetune.json").read_text())
    epochs = [{"epoch": epoch["epoch"], "held_out_l1": epoch["held_out_l1"]} for epoch in record["epochs"]]
    return {"backbone_dir": Path(backbone_dir).name, "finetune": {"config": record["config"], "epochs": epochs,
                                                                   "best_epoch": record.get("best_epoch")}}


def calibrate(forecaster: Forecaster, pairs: list[LengthPair], inputs: np.ndarray, models: int) -> Forecaster:
    """Per-model spreads from the held-out pairs' answers, and the overall spread from the any-model slot's."""
    answers = [np.asarray(pair.output_sizes, float) for pair in pairs]
    counts = np.asarray([len(row) for row in answers])
    estimates = np.repeat(forecaster.log_estimates_for(inputs), counts)
    any_inputs = as_any_model(torch.as_tensor(inputs), torch.arange(len(inputs)), models).numpy()
    any_estimates = np.repeat(forecaster.log_estimates_for(any_inputs), counts)
    truth = np.concatenate(answers)
    owners = np.repeat(np.asarray([pair.model for pair in pairs]), counts)
    spreads = {model: thinned_spread(truth[owners == model], estimates[owners == model]) for model in forecaster.config.models}
    return Forecaster(forecaster.model, forecaster.tokenizer, forecaster.config, thinned_spread(truth, any_estimates), spreads)
