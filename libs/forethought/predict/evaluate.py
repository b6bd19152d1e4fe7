"""Accuracy and speed of a trained predictor (SSJF section 4.3 accuracy; section 4.2 predictor overhead).

    python -m forethought.predict.evaluate [--model DIR] [--prompts 64] [--cache-check]

Prints the held-out accuracy table recorded at training time (5-class accuracy and macro F1 with buckets
at the training quintiles, MAE, Kendall tau, calibration of p10/p90) and measures on this machine the
latency of one prompt (p50/p99) and the throughput of batches of 32 on real held-out ShareGPT prompts.
``--cache-check`` fills the length cache (section 6) with the training split and reports how often
held-out prompts hit it as near-duplicates and how close the cached lengths are.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from forethought.predict.forecaster import Forecaster
from forethought.predict.length_cache import LengthCache
from forethought.predict.metrics import AccuracyReport, format_table
from forethought.predict.sharegpt import LengthSample, load_samples
from forethought.predict.train import DEFAULT_ARTIFACT_DIR, count_served_tokens


def recorded_table(model_dir: Path) -> str:
    config = json.loads((model_dir / "config.json").read_text())
    rows = {name: AccuracyReport(**values) for name, values in config["metrics"]["test"].items()}
    return format_table(rows)


def latency_table(forecaster: Forecaster, prompts: list[str], batch: int = 32) -> str:
    """Single-prompt latency percentiles and batched throughput, measured now."""
    forecaster.forecast(prompts[:2])  # warm-up: first calls allocate
    singles = []
    for prompt in prompts:
        started = time.perf_counter()
        forecaster.forecast([prompt])
        singles.append(time.perf_counter() - started)
    started = time.perf_counter()
    for start in range(0, len(prompts), batch):
        forecaster.forecast(prompts[start : start + batch])
    throughput = len(prompts) / (time.perf_counter() - started)
    p50, p99 = np.percentile(np.asarray(singles) * 1000, [50, 99])
    tokens = [len(ids) for ids in forecaster.tokenizer(prompts, truncation=True, max_length=forecaster.config.max_tokens)["input_ids"]]
    return "\n".join([
        "| prompts | median MiniLM tokens | latency p50 (ms) | latency p99 (ms) | batched throughput (prompts/s, batch 32) |",
        "|---|---|---|---|---|",
        f"| {len(prompts)} | {int(np.median(tokens))} | {p50:.1f} | {p99:.1f} | {throughput:.1f} |",
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_ARTIFACT_DIR)
    parser.add_argument("--prompts", type=int, default=64, help="held-out prompts timed")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--cache-check", action="store_true", help="near-duplicate length-cache hits on ShareGPT")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    forecaster = Forecaster.load(args.model)
    print(f"model {args.model} v{forecaster.config.version} ({forecaster.config.formulation.value})\n")
    print(recorded_table(args.model) + "\n")
    by_split = load_samples(count_served_tokens(), max_conversations=100_000 if args.cache_check else 1500)
    prompts = [sample.prompt for sample in by_split["test"][: args.prompts]]
    print(latency_table(forecaster, prompts))
    if args.cache_check:
        print("\n" + cache_check_table(by_split["train"], by_split["val"] + by_split["test"], forecaster))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
