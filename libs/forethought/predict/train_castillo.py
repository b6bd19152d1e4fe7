"""Train the model-aware predictor on CASTILLO's multi-model length labels (SSJF section 3.1, phase 2
alone, with the all-models variant's one-hot of the served model in the head's input).

    forethought train-predictor --castillo FILE [--out DIR] [--max-tokens 128] [--shipped]

The packaged MiniLM stays frozen: each distinct prompt is embedded once (mean-pooled, cached on disk under
the cache folder's ``embeddings/``), so training is minutes of head fitting on 2 cores. A pair's 10
answers are its target distribution: the L1 loss against every answer makes the head's output the
conditional median of log1p(length) for that prompt and model; a pairwise term (``rank_weight``, as in
phase 1) orders each batch's pairs of one model by their mean log answer, the order Kendall tau scores.
During fitting a share of rows see the any-model slot instead of their model's one-hot, which makes that
slot the model-agnostic forecast an unseen model starts from. A word table over the whole prompt
(``forethought.predict.prompt_words``: what the backbone's window misses) is fitted with the head, its
term added to the head's estimate. A tenth of the training prompts are held out to stop early and to
calibrate each model's spread.

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
from safetensors import SafetensorError

from forethought.predict.artifact import (
    BackboneSource,
    EncoderRuntime,
    Forecaster,
    ForecasterConfig,
    UnreadableArtifact,
    artifact_config,
    artifact_problem,
    int8_backbone,
    thinned_spread,
)
from forethought.predict.buckets import LengthBuckets
from forethought.predict.castillo import LengthPair, castillo_splits, load_pairs
from forethought.predict.embedding_cache import EmbeddingCache
from forethought.predict.evaluate import OVERALL, castillo_json, castillo_rows, pair_forecasts
from forethought.predict.fitting import snapshot, torch_threads
from forethought.predict.history import NO_HISTORY
from forethought.predict.metrics import SSJF_EDGE_PERCENTS, format_pair_table
from forethought.predict.prompt_words import WordBags, WordTable, model_columns, word_buckets
from forethought.predict.proxy import Formulation, Pooling, ProxyLengthModel, first_layers, packaged_backbone_dir
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
    # a MiniLM fine-tuned by ``forethought.predict.finetune_castillo`` (phase 1) to fit the head on, or a
    # predictor artifact whose int8 backbone to reuse; empty: the packaged one, frozen. Saved as a delta over
    # the packaged one when int8, else whole
    backbone_dir: str = ""
    # keep the backbone's first N transformer layers (0: all): a long window for a short one's cost
    backbone_layers: int = 0
    # hash buckets of the word table over the whole prompt (``forethought.predict.prompt_words``; 0: none)
    word_buckets: int = 1 << 17
    word_learning_rate: float = 0.01
    # weight of the pairwise term ordering a batch's pairs of one model by their mean answer (as in phase 1)
    rank_weight: float = 0.0
    rank_margin: float = 0.1  # pairs whose log mean lengths differ by less are not ordered
    # torch threads of the head fitting; on a machine others load, 1 is far faster than 2 (no spinning)
    threads: int = 2
    seed: int = 0
    # what runs the int8 backbone's forward (``artifact.EncoderRuntime``): the head is fitted on its states
    encoder_runtime: str = EncoderRuntime.TORCH.value


# the predictor the package ships: the last 512 tokens through 5 MiniLM layers, int8 on ONNX Runtime, under
# 10 ms a forecast at the median on 2 cores (docs/predictor.md, Speed)
SHIPPED_CASTILLO = CastilloConfig(max_tokens=512, backbone_int8=True, head_hidden=128, backbone_layers=5, rank_weight=0.5,
                                  encoder_runtime=EncoderRuntime.ONNXRUNTIME.value)


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


def pairwise_rank_loss(outputs: torch.Tensor, log_means: torch.Tensor, groups: torch.Tensor, margin: float) -> torch.Tensor:
    """Mean softplus(-(o_i - o_j)) over pairs of one group whose log mean i exceeds j's by ``margin``."""
    longer = (log_means[:, None] - log_means[None, :] > margin) & (groups[:, None] == groups[None, :])
    if not bool(longer.any()):
        return outputs.sum() * 0.0
    return torch.nn.functional.softplus(-(outputs[:, None] - outputs[None, :])[longer]).mean()


@dataclass(frozen=True)
class PairRows:
    """Pairs as the head is fitted on them: its input rows, the answers' log targets and their mask, each
    prompt's word buckets (none without a word table) and its model's word-table column (which also groups
    the pairs the ranking term orders)."""

    inputs: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    words: list[np.ndarray]
    columns: torch.Tensor

    @property
    def log_means(self) -> torch.Tensor:
        """Each pair's mean log answer length."""
        return (self.targets * self.mask).sum(dim=1) / self.mask.sum(dim=1)


def pair_estimates(
    head: torch.nn.Module, words: WordTable | None, models: int, rows: PairRows, chosen: torch.Tensor, any_model: torch.Tensor,
) -> torch.Tensor:
    """log1p estimates of the ``chosen`` rows, those marked in ``any_model`` asked through the any-model slot."""
    estimates = head(as_any_model(rows.inputs[chosen], any_model, models))[:, 0]
    if words is None:
        return estimates
    bags = WordBags.of([rows.words[row] for row in chosen.tolist()])
    return estimates + words(bags, torch.where(any_model, -1, rows.columns[chosen]))


def fit_pair_head(
    head: torch.nn.Module, words: WordTable | None, models: int, config: CastilloConfig, train: PairRows, validation: PairRows,
    progress: bool = False,
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], int]:
    """Fit ``head`` and ``words`` together to the answers; returns the weights of both at the epoch with
    the least held-out loss (the mean of the model-aware and the any-model loss), and that epoch."""
    from tqdm import tqdm

    generator = torch.Generator().manual_seed(config.seed)
    torch.manual_seed(config.seed)
    optimizers: list[torch.optim.Optimizer] = [
        torch.optim.AdamW(head.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)]
    if words is not None:  # each step touches a few hundred of the table's rows: a sparse update
        optimizers.append(torch.optim.SparseAdam(list(words.parameters()), lr=config.word_learning_rate))
    modules = [module for module in (head, words) if module is not None]
    held_rows = torch.arange(len(validation.inputs))
    log_means = train.log_means
    everyone, no_one = torch.ones(len(held_rows), dtype=torch.bool), torch.zeros(len(held_rows), dtype=torch.bool)

    def weights() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        return snapshot(head), snapshot(words) if words is not None else {}

    best: tuple[float, int, tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]] = (float("inf"), 0, ({}, {}))
    bar = tqdm(range(config.epochs), desc="fitting the head", disable=not progress)
    for epoch in bar:
        for module in modules:
            module.train()
        for batch in torch.randperm(len(train.inputs), generator=generator).split(config.batch_size):
            any_model = torch.rand(len(batch), generator=generator) < config.any_model_share
            estimates = pair_estimates(head, words, models, train, batch, any_model)
            loss = answer_l1(estimates[:, None], train.targets[batch], train.mask[batch])
            if config.rank_weight:
                loss = loss + config.rank_weight * pairwise_rank_loss(
                    estimates, log_means[batch], train.columns[batch], config.rank_margin)
            for optimizer in optimizers:
                optimizer.zero_grad()
            loss.backward()
            for optimizer in optimizers:
                optimizer.step()
        for module in modules:
            module.eval()
        with torch.no_grad():
            held = 0.5 * sum(
                float(answer_l1(pair_estimates(head, words, models, validation, held_rows, any_model)[:, None],
                                validation.targets, validation.mask))
                for any_model in (no_one, everyone)
            )
        bar.set_postfix(held_out_l1=f"{held:.4f}")
        if held < best[0]:
            best = (held, epoch, weights())
        elif epoch - best[1] >= config.patience:
            break
    return best[2][0], best[2][1], best[1]


def fitting_backbone(config: CastilloConfig) -> torch.nn.Module:
    """The backbone the head is fitted on: ``config.backbone_dir``'s (a predictor artifact's int8 backbone,
    or a MiniLM fine-tuned by ``finetune_castillo``), else the packaged MiniLM; cut to its first
    ``config.backbone_layers`` layers.

    Raises:
        UnreadableArtifact: ``config.backbone_dir`` holds neither a predictor nor a MiniLM that loads.
        ValueError: a predictor artifact's backbone asked for in float32 (it is stored as int8).
    """
    from transformers import AutoModel

    if config.backbone_dir and artifact_problem(Path(config.backbone_dir)) is None:
        if not config.backbone_int8:
            raise ValueError(f"{config.backbone_dir} is a predictor artifact: its backbone is reused as int8 only")
        backbone = Forecaster.load(Path(config.backbone_dir)).model.backbone
    else:
        try:
            backbone = AutoModel.from_pretrained(config.backbone_dir or str(packaged_backbone_dir()))
        except (OSError, ValueError, SafetensorError) as error:
            if not config.backbone_dir:
                raise
            raise UnreadableArtifact(
                f"{config.backbone_dir} holds neither a predictor nor a fine-tuned MiniLM that loads "
                f"({type(error).__name__}: {error}); `python -m forethought.predict.finetune_castillo` writes one") from None
        backbone = int8_backbone(backbone) if config.backbone_int8 else backbone
    if config.backbone_layers and config.backbone_layers < len(backbone.encoder.layer):
        backbone = first_layers(backbone, config.backbone_layers)
    return backbone


def train_castillo(
    path: Path, out_dir: Path, config: CastilloConfig = CastilloConfig(), embedding_cache: Path | None = EMBEDDINGS_DIR,
    progress: bool = True,
) -> tuple[Forecaster, str]:
    """Train on ``path``'s train split (and a share of validate), score on the rest of validate, save the
    artifact to ``out_dir``; returns the forecaster and the table of the scored pairs."""
    from transformers import AutoTokenizer

    backbone = fitting_backbone(config)  # before the data: a folder that does not load stops the run at once
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
    source = (BackboneSource.DELTA if config.backbone_int8 else BackboneSource.ARTIFACT) if config.backbone_dir else BackboneSource.PACKAGED
    proxy = ProxyLengthModel(backbone, Formulation.REG_L1, config.head_hidden, Pooling.MEAN, model_input_width(models))
    forecaster_config = ForecasterConfig(
        version=1, formulation=Formulation.REG_L1, max_tokens=config.max_tokens, head_hidden=config.head_hidden,
        bucket_edges=buckets.edges, bucket_log_medians=bucket_log_medians(lengths, buckets),
        backbone=source, pooling=Pooling.MEAN,
        training=dict(asdict(config), data=Path(path).name, fit_pairs=len(fit_pairs), calibration_pairs=len(calibration_pairs),
                      scored_pairs=len(validate_pairs), **finetune_record(config.backbone_dir)),
        models=models, model_bucket_edges=model_edges, history_features=False, backbone_int8=config.backbone_int8,
        backbone_layers=len(backbone.encoder.layer), encoder_runtime=EncoderRuntime(config.encoder_runtime),
    )
    base = Forecaster(proxy, AutoTokenizer.from_pretrained(str(backbone_dir)), forecaster_config,
                      thinned_spread(np.ones(1), np.zeros(1)))
    cache = EmbeddingCache.for_backbone(embedding_cache, proxy.backbone, config.max_tokens, Pooling.MEAN.value, config.encoder_runtime)
    prompts = list(dict.fromkeys(pair.prompt for pair in pairs))
    states = cache.embed(prompts, base.embed, progress, "embedding prompts")
    row_of = {prompt: row for row, prompt in enumerate(prompts)}

    prompt_words = {prompt: word_buckets(prompt, config.word_buckets) for prompt in prompts} if config.word_buckets else {}

    def rows_for(chosen: list[LengthPair]) -> PairRows:
        texts = [pair.prompt for pair in chosen]
        inputs = base.inputs(states[[row_of[text] for text in texts]], texts, [NO_HISTORY] * len(chosen), [pair.model for pair in chosen])
        return PairRows(torch.as_tensor(inputs), *answer_targets(chosen),
                        [prompt_words[text] for text in texts] if prompt_words else [],
                        model_columns(models, [pair.model for pair in chosen]))

    fit_rows, calibration_rows = rows_for(fit_pairs), rows_for(calibration_pairs)
    words = WordTable(config.word_buckets, len(models)) if config.word_buckets else None
    # the head starts at the typical length, so the word table learns words' effects, not the intercept
    proxy.start_at(fit_rows.targets[fit_rows.mask > 0])
    with torch_threads(min(config.threads, os.cpu_count() or 1)):
        head_state, words_state, best_epoch = fit_pair_head(proxy.head, words, len(models), config, fit_rows, calibration_rows, progress)
    if words is not None:
        words.load_state_dict(words_state)
    trained = base.with_head(head_state, base.spread, words, training=dict(forecaster_config.training, best_epoch=best_epoch))
    forecaster = calibrate(trained, calibration_pairs, calibration_rows.inputs.numpy(), len(models))
    points, p90s = pair_forecasts(forecaster, validate_pairs, embedding_cache)
    rows = castillo_rows(validate_pairs, points, p90s, forecaster.spread_for)
    any_points, any_p90s = pair_forecasts(forecaster, validate_pairs, embedding_cache, as_model=ANY_MODEL)
    any_rows = castillo_rows(validate_pairs, any_points, any_p90s, lambda _: forecaster.spread)
    forecaster.config.metrics = {
        "castillo_validate": castillo_json(rows, Path(path), "model-aware head")["models"],
        "castillo_validate_any_model": castillo_json(any_rows, Path(path), "any-model slot")["models"][OVERALL],
    }
    forecaster.save(out_dir)
    table = format_pair_table({**rows, "mean over models, any-model slot (unseen model, uncalibrated)": any_rows[OVERALL]})
    return forecaster, table


def finetune_record(backbone_dir: str) -> dict[str, Any]:
    """The phase-1 run's settings and held-out losses by epoch (``finetune.json``), its folder by name; for a
    predictor artifact's backbone, the record it carries."""
    if not backbone_dir:
        return {}
    if artifact_problem(Path(backbone_dir)) is None:
        training = artifact_config(Path(backbone_dir)).training
        return {name: training[name] for name in ("backbone_dir", "finetune") if name in training}
    record = json.loads((Path(backbone_dir) / "finetune.json").read_text())
    epochs = [{"epoch": epoch["epoch"], "held_out_l1": epoch["held_out_l1"]} for epoch in record["epochs"]]
    return {"backbone_dir": Path(backbone_dir).name, "finetune": {"config": record["config"], "epochs": epochs,
                                                                   "best_epoch": record.get("best_epoch")}}


def calibrate(forecaster: Forecaster, pairs: list[LengthPair], inputs: np.ndarray, models: int) -> Forecaster:
    """Per-model spreads from the held-out pairs' answers, and the overall spread from the any-model slot's."""
    answers = [np.asarray(pair.output_sizes, float) for pair in pairs]
    counts = np.asarray([len(row) for row in answers])
    prompts = [pair.prompt for pair in pairs]
    own_terms = forecaster.word_terms(prompts, [pair.model for pair in pairs])
    estimates = np.repeat(forecaster.log_estimates_for(inputs, own_terms), counts)
    any_inputs = as_any_model(torch.as_tensor(inputs), torch.arange(len(inputs)), models).numpy()
    any_terms = forecaster.word_terms(prompts, [ANY_MODEL] * len(pairs))
    any_estimates = np.repeat(forecaster.log_estimates_for(any_inputs, any_terms), counts)
    truth = np.concatenate(answers)
    owners = np.repeat(np.asarray([pair.model for pair in pairs]), counts)
    spreads = {model: thinned_spread(truth[owners == model], estimates[owners == model]) for model in forecaster.config.models}
    return Forecaster(forecaster.model, forecaster.tokenizer, forecaster.config, thinned_spread(truth, any_estimates), spreads,
                      forecaster.words)
