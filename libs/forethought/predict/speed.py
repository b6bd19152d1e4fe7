"""Forecast latency against accuracy for the predictor's speed settings (SSJF section 4.2, predictor
overhead: 7.6 ms per prompt on a GPU).

    python -m forethought.predict.speed --castillo FILE [--model DIR ...] [--windows 128 64 32] [--threads 2]

For each artifact, token window (the prompt's last N MiniLM tokens; an artifact's head is trained at one
window, shorter ones read less of the same prompt) and backbone precision (float32, or the Linear layers
as dynamic int8), it times one ``Forecaster.forecast([prompt])`` call per prompt on CASTILLO validate
prompts (p50, p99), with the backbone's forward traced into a graph as the service runs it and, on the
next row, called as a module, and scores the setting on the artifact's scored validate pairs (Kendall
tau against single answers and SSJF-edge accuracy, averaged over models), so each speed trick shows its
accuracy cost beside its latency. The forward is timed three ways: traced into a torch graph, called as
a torch module (the same states, so one score), and, for int8, on ONNX Runtime (the network exported and
quantized there, scored on its own states: its int8 arithmetic is not torch's).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from forethought.predict.artifact import EncoderRuntime, Forecaster
from forethought.predict.castillo import LengthPair, load_pairs
from forethought.predict.evaluate import OVERALL, castillo_rows, pair_forecasts, scored_pairs
from forethought.predict.history import NO_HISTORY
from forethought.predict.metrics import PairReport
from forethought.predict.shipped import load_model_flag, predictor_folder


def latencies_ms(forecaster: Forecaster, pairs: list[LengthPair]) -> np.ndarray:
    """Milliseconds of one forecast per pair, one prompt at a time, after two warm-up calls."""
    for pair in pairs[:2]:
        forecaster.forecast([pair.prompt], [NO_HISTORY], [pair.model])
    timings = []
    for pair in pairs:
        started = time.perf_counter()
        forecaster.forecast([pair.prompt], [NO_HISTORY], [pair.model])
        timings.append((time.perf_counter() - started) * 1000)
    return np.asarray(timings)


def speed_rows(
    forecaster: Forecaster, name: str, pairs: list[LengthPair], windows: list[int], timed: int, scored: int,
    seed: int = 0,
) -> list[str]:
    """One table row per (window, precision, forward) of ``forecaster``."""
    rng = np.random.default_rng(seed)
    candidates = scored_pairs(forecaster, pairs)
    prompt_ids = sorted({pair.prompt_id for pair in candidates})
    chosen = set(rng.choice(prompt_ids, size=min(scored, len(prompt_ids)), replace=False).tolist())
    sample = [pair for pair in candidates if pair.prompt_id in chosen]
    timed_pairs = [sample[index] for index in rng.choice(len(sample), size=min(timed, len(sample)), replace=False)]
    rows = []

    def score(variant: Forecaster) -> PairReport:
        points, p90s = pair_forecasts(variant, sample, embedding_cache=None)
        return castillo_rows(sample, points, p90s, variant.spread_for)[OVERALL][0]

    for window in windows:
        # an int8 artifact has no float32 backbone to go back to
        for int8 in (True,) if forecaster.config.backbone_int8 else (False, True):
            traced = forecaster.with_speed(window, int8, runtime=EncoderRuntime.TORCH)
            on_torch = score(traced)
            # the module row shares the traced row's backbone and states: one int8 copy and one score for both
            forwards = [("torch traced", traced, on_torch),
                        ("torch module", traced.with_speed(window, int8, traced=False), on_torch)]
            if int8:
                on_onnx = traced.with_speed(window, int8, runtime=EncoderRuntime.ONNXRUNTIME)
                forwards.append(("onnxruntime", on_onnx, score(on_onnx)))
            for forward, variant, scores in forwards:
                timings = latencies_ms(variant, timed_pairs)
                rows.append(
                    f"| {name} | {forecaster.config.training.get('max_tokens', forecaster.config.max_tokens)} | {window} | "
                    f"{'int8' if int8 else 'float32'} | {forward} | "
                    f"{np.percentile(timings, 50):.1f} | {np.percentile(timings, 99):.1f} | "
                    f"{scores.tau_samples:.3f} | {scores.ssjf_accuracy:.3f} | {scores.pairs} |"
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--castillo", type=Path, required=True, help="CASTILLO-format file (its validate split is used)")
    parser.add_argument("--model", type=predictor_folder, nargs="*", default=[],
                        help="predictor folders (default: the one the service loads)")
    parser.add_argument("--windows", type=int, nargs="+", default=[128, 64, 32], help="token windows to try")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--prompts", type=int, default=200, help="prompts timed per setting")
    parser.add_argument("--scored-prompts", type=int, default=300, help="validate prompts scored per setting (all their models)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(args.threads)
    pairs = load_pairs(args.castillo, ["validate"])
    print(f"torch threads {args.threads}; one forecast([prompt]) call per prompt; accuracy: mean over models\n")
    print("| predictor | trained window | window | backbone | forward | p50 (ms) | p99 (ms) | tau vs samples | SSJF-edge acc "
          "| pairs scored |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for directory in args.model or [None]:
        _, forecaster = load_model_flag(parser, directory)
        for row in speed_rows(forecaster, str(directory or "default"), pairs, args.windows, args.prompts, args.scored_prompts):
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
