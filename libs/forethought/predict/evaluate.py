"""Accuracy and speed of a trained predictor (SSJF section 4.3 accuracy; section 4.2 predictor overhead).

    python -m forethought.predict.evaluate [--model DIR] [--compare DIR ...] [--prompts 64] [--cache-check] [--formulations]
    python -m forethought.predict.evaluate --castillo FILE [--split validate] [--json OUT] [--model DIR]

Prints the held-out accuracy table recorded at training time (5-class accuracy and macro F1 with buckets
at the training quintiles, MAE, Kendall tau, calibration of p10/p90), with a row for each ``--compare``
artifact (artifacts trained on the default splits, the shipped one included, share the test samples),
and measures on this machine the
latency of one prompt (p50/p99) and the throughput of batches of 32 on real held-out ShareGPT prompts.
``--cache-check`` fills the length cache (section 6) with the training split and reports how often
held-out prompts hit it as near-duplicates and how close the cached lengths are. ``--formulations`` is
the ablation of section 4.3 (Table 2): a phase-2 head per formulation on the artifact's frozen backbone,
plus the default head without the history features (text only).

``--castillo FILE`` scores the predictor on a file of CASTILLO's format instead (each prompt answered
several times by each of several models; a predictor trained on CASTILLO is scored on the validate
prompts it did not train on): per model and averaged over models, Kendall tau against the
pair mean and against single answers, accuracy with SSJF's class edges and with quintiles, MAE and the
share of answers under the p90 forecast, each beside the ceiling (an oracle knowing each pair's mean).
The table is printed and written as JSON (``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from forethought.arguments import input_file
from forethought.predict.artifact import Forecaster
from forethought.predict.buckets import ResidualSpread
from forethought.predict.castillo import LengthPair, by_model, castillo_splits, load_pairs
from forethought.predict.embedding_cache import EmbeddingCache
from forethought.predict.history import HISTORY_FEATURES, NO_HISTORY
from forethought.predict.length_cache import LengthCache
from forethought.predict.metrics import (
    AccuracyReport,
    PairReport,
    ceiling_report,
    format_pair_table,
    format_table,
    mean_pair_report,
    mean_report,
    pair_report,
)
from forethought.predict.proxy import Formulation, ProxyLengthModel, training_targets
from forethought.predict.sharegpt import LengthSample, load_samples
from forethought.predict.shipped import SHIPPED_DIR, load_model_flag, predictor_folder
from forethought.predict.train import (
    EMBEDDINGS_DIR,
    TrainConfig,
    calibrated,
    count_served_tokens,
    evaluate_on,
    fit_phase2,
    head_subsets,
    inputs_of,
    lengths_of,
    sample_splits,
)


def recorded_table(model_dir: Path, compared: Sequence[Path] = ()) -> str:
    """The model row recorded at training by ``model_dir`` and each ``compared`` artifact, then
    ``model_dir``'s baselines."""
    model_rows = {}
    for artifact in (model_dir, *compared):
        for name, report in list(recorded_rows(artifact).items())[:1]:
            model_rows[f"{artifact_label(artifact)}: {name}"] = report
    baselines = dict(list(recorded_rows(model_dir).items())[1:])
    if not model_rows:
        return "(no ShareGPT test scores recorded: a CASTILLO-trained predictor is scored with --castillo FILE)"
    return format_table({**model_rows, **baselines})


def recorded_rows(model_dir: Path) -> dict[str, AccuracyReport]:
    """The ShareGPT test scores recorded at training (none for a predictor trained on CASTILLO)."""
    config = json.loads((model_dir / "config.json").read_text())
    return {name: AccuracyReport(**values) for name, values in config["metrics"].get("test", {}).items()}


def artifact_label(model_dir: Path) -> str:
    return "shipped" if model_dir.resolve() == SHIPPED_DIR else str(model_dir)


def latency_table(forecaster: Forecaster, samples: list[LengthSample], batch: int = 32) -> str:
    """Single-prompt latency percentiles and throughput, one prompt at a time and batched, measured now."""
    histories = [sample.history for sample in samples]
    prompts = [sample.prompt for sample in samples]
    forecaster.forecast(prompts[:2], histories[:2])  # warm-up: first calls allocate
    singles = []
    for prompt, history in zip(prompts, histories):
        started = time.perf_counter()
        forecaster.forecast([prompt], [history])
        singles.append(time.perf_counter() - started)
    started = time.perf_counter()
    for start in range(0, len(prompts), batch):
        forecaster.forecast(prompts[start : start + batch], histories[start : start + batch])
    throughput = len(prompts) / (time.perf_counter() - started)
    p50, p99 = np.percentile(np.asarray(singles) * 1000, [50, 99])
    tokens = [len(ids) for ids in forecaster.tokenizer(prompts, truncation=True, max_length=forecaster.config.max_tokens)["input_ids"]]
    return "\n".join([
        "| prompts | median MiniLM tokens | latency p50 (ms) | latency p99 (ms) | throughput one at a time (prompts/s) "
        f"| batched throughput (prompts/s, batch {batch}) |",
        "|---|---|---|---|---|---|",
        f"| {len(prompts)} | {int(np.median(tokens))} | {p50:.1f} | {p99:.1f} | {len(prompts) / sum(singles):.1f} | {throughput:.1f} |",
    ])


def cache_check_table(train: list[LengthSample], held_out: list[LengthSample], forecaster: Forecaster) -> str:
    """Near-duplicate hits of held-out prompts in a cache of the training prompts (exact repeats were
    already removed from the held-out split), and the error of the cached lengths."""
    cache = LengthCache(capacity=len(train) + 1)
    for sample in train:
        cache.put(sample.prompt, sample.output_tokens)
    hits = [(sample.output_tokens, cache.get(sample.prompt)) for sample in held_out]
    pairs = np.asarray([(true, cached) for true, cached in hits if cached is not None], dtype=float).reshape(-1, 2)
    same_bucket = forecaster.buckets.index(pairs[:, 0]) == forecaster.buckets.index(pairs[:, 1]) if len(pairs) else np.zeros(0)
    mae = float(np.mean(np.abs(pairs[:, 0] - pairs[:, 1]))) if len(pairs) else float("nan")
    return "\n".join([
        "| cached training prompts | held-out prompts | near-duplicate hits | hit rate | 5-class acc of hits | MAE of hits (tokens) |",
        "|---|---|---|---|---|---|",
        (f"| {len(cache)} | {len(held_out)} | {len(pairs)} | {len(pairs) / max(len(held_out), 1):.3f} | "
         f"{float(np.mean(same_bucket)) if len(pairs) else float('nan'):.3f} | {mae:.1f} |"),
    ])


def formulation_ablation(
    model_dir: Path, seeds: Sequence[int] = (0,), dataset: Path | None = None,
    embedding_cache: Path | None = EMBEDDINGS_DIR, progress: bool = False,
) -> dict[str, AccuracyReport]:
    """Test scores of a fresh phase-2 head per formulation (and seed) on the artifact's frozen backbone.

    The splits, phase-2 settings and CLS states are the artifact's own (its training config, the embedding
    cache), so the rows differ only in the head's formulation and initialization; each head is
    early-stopped and calibrated on the validation split. The artifact itself and the baselines come first.
    """
    base = Forecaster.load(model_dir)
    config = TrainConfig(**base.config.training)
    splits = head_subsets(sample_splits(config, dataset), config)
    cache = EmbeddingCache.for_backbone(embedding_cache, base.model.backbone, config.max_tokens, base.config.pooling.value,
                                        base.config.encoder_runtime.value)
    inputs = {
        split: inputs_of(cache.embed([s.prompt for s in samples], base.embed, progress, f"embedding {split}"), samples)
        for split, samples in splits.items()
    }
    def scored_on(rows: dict[str, np.ndarray]) -> Callable[[Forecaster], dict[str, AccuracyReport]]:
        return lambda forecaster: evaluate_on(forecaster, splits["test"], rows["test"], splits["train"], splits["val"])

    scored = scored_on(inputs)
    installed = scored(base)
    rows = {name.replace("proxy model", "installed artifact"): report for name, report in installed.items()}
    for formulation in Formulation:
        per_seed = [fresh_head_report(base, formulation, config, seed, splits, inputs, scored) for seed in seeds]
        if len(seeds) == 1:
            rows[formulation.value] = per_seed[0]
            continue
        rows.update({f"{formulation.value}, seed {seed}": report for seed, report in zip(seeds, per_seed)})
        rows[f"{formulation.value}, mean of {len(seeds)} seeds"] = mean_report(per_seed)
    text_only = {split: without_history(rows) for split, rows in inputs.items()}
    default = Formulation(config.formulation)
    per_seed = [fresh_head_report(base, default, config, seed, splits, text_only, scored_on(text_only)) for seed in seeds]
    rows[f"{default.value}, text only (no history features), mean of {len(seeds)} seeds"] = mean_report(per_seed)
    return rows


def without_history(inputs: np.ndarray) -> np.ndarray:
    """Head inputs with the history features zeroed: every prompt looks like a conversation's first."""
    blank = inputs.copy()
    blank[:, -HISTORY_FEATURES:] = 0.0
    return blank


def fresh_head_report(
    base: Forecaster, formulation: Formulation, config: TrainConfig, seed: int,
    splits: dict[str, list[LengthSample]], inputs: dict[str, np.ndarray],
    scored: Callable[[Forecaster], dict[str, AccuracyReport]],
) -> AccuracyReport:
    """One formulation's head, started as training starts it (output at the median target), fitted in phase 2."""
    torch.manual_seed(seed)
    model = ProxyLengthModel(base.model.backbone, formulation, config.head_hidden, base.config.pooling)
    targets = training_targets(formulation, lengths_of(splits["train"]), base.buckets)
    model.start_at(targets)
    validation = (inputs["val"], training_targets(formulation, lengths_of(splits["val"]), base.buckets))
    head_state = fit_phase2(model.head, formulation, replace(config, seed=seed), inputs["train"], targets, validation)
    forecaster = calibrated(base.with_head(head_state, base.spread, formulation=formulation), head_state, inputs["val"], splits["val"])
    return next(iter(scored(forecaster).values()))


OVERALL = "mean over models"


def pair_forecasts(
    forecaster: Forecaster, pairs: Sequence[LengthPair], embedding_cache: Path | None = EMBEDDINGS_DIR,
    progress: bool = False, as_model: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Point forecast and p90 (tokens) of each pair for its model (for ``as_model`` when given); each
    distinct prompt is embedded once (and cached on disk under ``embedding_cache``)."""
    cache = EmbeddingCache.for_backbone(embedding_cache, forecaster.model.backbone, forecaster.config.max_tokens,
                                        forecaster.config.pooling.value, forecaster.config.encoder_runtime.value)
    prompts = list(dict.fromkeys(pair.prompt for pair in pairs))
    states = cache.embed(prompts, forecaster.embed, progress, "embedding prompts")
    row_of = {prompt: row for row, prompt in enumerate(prompts)}
    texts = [pair.prompt for pair in pairs]
    models = [pair.model if as_model is None else as_model for pair in pairs]
    inputs = forecaster.inputs(states[[row_of[text] for text in texts]], texts, [NO_HISTORY] * len(pairs), models)
    forecasts = forecaster.forecast_inputs(inputs, models, word_terms=forecaster.word_terms(texts, models))
    return (np.asarray([forecast.mean for forecast in forecasts]),
            np.asarray([forecast.quantiles[90] for forecast in forecasts]))


def scored_pairs(forecaster: Forecaster, pairs: list[LengthPair]) -> list[LengthPair]:
    """The pairs the artifact did not train on: for one trained on CASTILLO, the validate prompts its
    training config left out; for any other, all of them."""
    training = forecaster.config.training
    if "validate_train_share" not in training:
        return pairs
    return castillo_splits(pairs, training["validate_train_share"], training["holdout_share"])["scored"]


def castillo_rows(pairs: Sequence[LengthPair], points: np.ndarray, p90s: np.ndarray | None = None,
                  spread_of: Callable[[str], ResidualSpread] | None = None) -> dict[str, tuple[PairReport, PairReport]]:
    """(forecast, ceiling) reports per model, then their mean over models; ``spread_of(model)`` is the
    spread of the forecasts for that model (their class is its most probable one; without spreads, their
    point's). Without ``p90s`` coverage is NaN."""
    rows = {}
    for model, indices in by_model(pairs).items():
        sizes = [pairs[index].output_sizes for index in indices]
        report = pair_report(points[indices], sizes, None if p90s is None else p90s[indices],
                             None if spread_of is None else spread_of(model))
        rows[model] = (report, ceiling_report(sizes))
    rows[OVERALL] = (mean_pair_report([report for report, _ in rows.values()]),
                     mean_pair_report([ceiling for _, ceiling in rows.values()]))
    return rows


def castillo_json(rows: dict[str, tuple[PairReport, PairReport]], source: Path, description: str) -> dict[str, object]:
    return {"file": str(source), "predictor": description,
            "models": {name: {"forecast": report.as_dict(), "ceiling": ceiling.as_dict()} for name, (report, ceiling) in rows.items()}}


def evaluate_castillo(
    forecaster: Forecaster, description: str, path: Path, splits: Sequence[str], json_out: Path | None,
    embedding_cache: Path | None = EMBEDDINGS_DIR,
) -> str:
    pairs = scored_pairs(forecaster, load_pairs(path, splits))
    if not pairs:
        raise SystemExit(f"no pairs of split {', '.join(splits)} in {path}")
    points, p90s = pair_forecasts(forecaster, pairs, embedding_cache, progress=True)
    rows = castillo_rows(pairs, points, p90s, forecaster.spread_for)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(castillo_json(rows, path, description), indent=2))
    return format_pair_table(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=predictor_folder, default=None, help="predictor folder (default: the one the service loads)")
    parser.add_argument("--compare", type=Path, nargs="*", default=[], help="predictor folders whose recorded scores join the table")
    parser.add_argument("--prompts", type=int, default=64, help="held-out prompts timed")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--cache-check", action="store_true", help="near-duplicate length-cache hits on ShareGPT")
    parser.add_argument("--formulations", action="store_true", help="phase-2 head per formulation (Table 2)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="head seeds for --formulations")
    parser.add_argument("--castillo", type=input_file, default=None, help="score on this CASTILLO-format file (.jsonl or .jsonl.gz)")
    parser.add_argument("--split", nargs="*", default=["validate"], help="--castillo rows of these splits (none given: all)")
    parser.add_argument("--json", type=Path, default=None, help="--castillo: also write the table as JSON here")
    parser.add_argument("--embedding-cache", type=Path, default=EMBEDDINGS_DIR, help="--castillo: where text states are cached")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.threads:
        torch.set_num_threads(args.threads)
    choice, forecaster = load_model_flag(parser, args.model)
    print(f"{choice.description}, v{forecaster.config.version} ({forecaster.config.formulation.value})\n")
    if args.castillo is not None:
        print("each cell: forecast / ceiling (an oracle knowing each pair's mean length)\n")
        print(evaluate_castillo(forecaster, choice.description, args.castillo, args.split, args.json, args.embedding_cache))
        return 0
    print(recorded_table(choice.directory, [folder.expanduser() for folder in args.compare]) + "\n")
    by_split = load_samples(count_served_tokens(), max_conversations=100_000 if args.cache_check else 1500)
    print(latency_table(forecaster, by_split["test"][: args.prompts]))
    if args.cache_check:
        print("\n" + cache_check_table(by_split["train"], by_split["val"] + by_split["test"], forecaster))
    if args.formulations:
        print("\n" + format_table(formulation_ablation(choice.directory, args.seeds, progress=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
