"""Accuracy and speed of a trained predictor (SSJF section 4.3 accuracy; section 4.2 predictor overhead).

    python -m forethought.predict.evaluate [--model DIR] [--prompts 64]

Prints the held-out accuracy table recorded at training time (5-class accuracy and macro F1 with buckets
at the training quintiles, MAE, Kendall tau, calibration of p10/p90) and measures on this machine the
latency of one prompt (p50/p99) and the throughput of batches of 32 on real held-out ShareGPT prompts.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from forethought.predict.forecaster import Forecaster
from forethought.predict.metrics import AccuracyReport, format_table
from forethought.predict.sharegpt import load_samples
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_ARTIFACT_DIR)
    parser.add_argument("--prompts", type=int, default=64, help="held-out prompts timed")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    forecaster = Forecaster.load(args.model)
    print(f"model {args.model} v{forecaster.config.version} ({forecaster.config.formulation.value})\n")
    print(recorded_table(args.model) + "\n")
    samples = load_samples(count_served_tokens(), max_conversations=1500)["test"]
    prompts = [sample.prompt for sample in samples[: args.prompts]]
    print(latency_table(forecaster, prompts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
