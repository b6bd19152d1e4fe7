"""Train the SSJF proxy length predictor on ShareGPT and write an artifact folder (SSJF section 3.1).

    python -m forethought.predict.train [--out DIR] [--quick | --shipped] [--formulation reg-l1|reg-mse|cls|ordinal]
    python -m forethought.predict.train --castillo FILE [--out DIR] [--shipped] [--max-tokens 128] [--int8]

Labels are response lengths in SmolLM2-135M-Instruct tokens (the served model); the head reads each
prompt's CLS state and its conversation's history features. The full run fine-tunes the backbone (phase
1) and is sized for a 2-core CPU (see docs/predictor.md); ``--shipped`` is phase 2 alone on the packaged
MiniLM, frozen, and rewrites the predictor the package ships; ``--quick`` is the small run the tests use.
``--castillo`` trains the model-aware predictor on multi-model labels instead (``train_castillo``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from forethought.arguments import input_file, input_folder
from forethought.cache import CACHE_ROOT, PREDICTOR_DIR
from forethought.predict.artifact import (
    BackboneSource,
    EncoderRuntime,
    Forecaster,
    ForecasterConfig,
    UnreadableArtifact,
    artifact_problem,
)
from forethought.predict.buckets import LengthBuckets, ResidualSpread
from forethought.predict.embedding_cache import EmbeddingCache
from forethought.predict.fitting import finetune_whole, fit_head, torch_threads
from forethought.predict.history import head_inputs, history_features
from forethought.predict.length_forecast import LengthForecast
from forethought.predict.metrics import (
    AccuracyReport,
    accuracy_report,
    fit_log_linear,
    format_table,
)
from forethought.predict.proxy import (
    Formulation,
    Pooling,
    ProxyLengthModel,
    packaged_backbone_dir,
    predicted_buckets,
    training_targets,
)
from forethought.predict.served_models import SERVED_MODEL
from forethought.predict.sharegpt import LengthSample, load_samples
from forethought.predict.shipped import SHIPPED_DIR

HELDOUT_FILE = "heldout.jsonl"
DEFAULT_ARTIFACT_DIR = PREDICTOR_DIR
EMBEDDINGS_DIR = CACHE_ROOT / "embeddings"


@dataclass(frozen=True)
class TrainConfig:
    formulation: str = Formulation.REG_L1.value
    max_conversations: int = 100_000  # every record of the packaged (truncated) file
    phase1_samples: int = 3000  # 0: no phase 1; the head sits on the packaged MiniLM, frozen
    phase2_samples: int = 12_000
    val_samples: int = 1500
    test_samples: int = 1500
    max_tokens: int = 512  # the paper's window: multi-round context keeps the last 512 tokens
    phase1_max_tokens: int = 512
    batch_size: int = 16
    phase1_epochs: int = 1
    phase1_learning_rate: float = 3e-5
    phase2_epochs: int = 300  # an upper bound: early stopping on the validation loss ends it
    phase2_learning_rate: float = 1e-3
    phase2_patience: int = 20
    head_hidden: int = 256
    pooling: str = Pooling.CLS.value
    seed: int = 0
    # phase 2 on a seeded subset of the training and validation samples (0: all of them), drawn from the
    # splits, so the test samples and the buckets stay those of the default config
    head_train_samples: int = 0
    head_val_samples: int = 0


QUICK = TrainConfig(
    max_conversations=300, phase1_samples=32, phase2_samples=160, val_samples=96, test_samples=96,
    max_tokens=96, phase1_max_tokens=64, phase2_epochs=20, phase2_patience=5,
)
# the predictor in the package: the default config's splits, a frozen backbone, and few enough prompts to
# embed that it retrains in about 10 minutes on a 2-core CPU
SHIPPED = TrainConfig(
    phase1_samples=0, head_train_samples=2000, head_val_samples=800, max_tokens=128, head_hidden=128,
    pooling=Pooling.MEAN.value,
)
LEARNING_CURVE_SIZES = (1000, 2000, 4000, 8000)


@dataclass
class TrainResult:
    forecaster: Forecaster
    table: str
    seconds: float


def count_served_tokens() -> Callable[[list[str]], list[int]]:
    from forethought.tokenize import TokenizerRegistry

    tokenizer = TokenizerRegistry().get(SERVED_MODEL)
    return lambda texts: [len(ids) for ids in tokenizer.encode_batch(texts)]


def sample_splits(config: TrainConfig, dataset: Path | None, progress: bool = False) -> dict[str, list[LengthSample]]:
    rng = np.random.default_rng(config.seed)
    by_split = load_samples(count_served_tokens(), config.max_conversations, dataset, progress)
    sizes = {"train": config.phase2_samples, "val": config.val_samples, "test": config.test_samples}
    return {split: seeded_subset(samples, sizes[split], rng) for split, samples in by_split.items()}


def head_subsets(splits: dict[str, list[LengthSample]], config: TrainConfig) -> dict[str, list[LengthSample]]:
    """The samples phase 2 fits and calibrates on: seeded subsets where the config asks for them; the test
    split stays whole."""
    rng = np.random.default_rng(config.seed)
    sizes = {"train": config.head_train_samples, "val": config.head_val_samples}
    return {split: seeded_subset(samples, sizes.get(split) or len(samples), rng) for split, samples in splits.items()}


def seeded_subset(samples: list[LengthSample], size: int, rng: np.random.Generator) -> list[LengthSample]:
    """``size`` of ``samples`` drawn by ``rng``, in their original order."""
    chosen = rng.choice(len(samples), size=min(size, len(samples)), replace=False)
    return [samples[i] for i in sorted(chosen)]


def lengths_of(samples: list[LengthSample]) -> np.ndarray:
    return np.asarray([sample.output_tokens for sample in samples], dtype=float)


def bucket_log_medians(lengths: np.ndarray, buckets: LengthBuckets) -> tuple[float, ...]:
    index = buckets.index(lengths)
    return tuple(float(np.median(np.log1p(lengths[index == k]))) for k in range(buckets.count))


def initial_forecaster(config: TrainConfig, train_lengths: np.ndarray) -> Forecaster:
    from transformers import AutoModel, AutoTokenizer

    backbone_dir = packaged_backbone_dir()
    formulation = Formulation(config.formulation)
    buckets = LengthBuckets.from_lengths(train_lengths)
    pooling = Pooling(config.pooling)
    model = ProxyLengthModel(AutoModel.from_pretrained(str(backbone_dir)), formulation, config.head_hidden, pooling)
    forecaster_config = ForecasterConfig(
        version=1, formulation=formulation, max_tokens=config.max_tokens, head_hidden=config.head_hidden,
        bucket_edges=buckets.edges, bucket_log_medians=bucket_log_medians(train_lengths, buckets),
        backbone=BackboneSource.ARTIFACT if config.phase1_samples else BackboneSource.PACKAGED, pooling=pooling,
        training=asdict(config),
    )
    return Forecaster(model, AutoTokenizer.from_pretrained(str(backbone_dir)), forecaster_config, ResidualSpread((0.0,)))


def inputs_of(states: np.ndarray, samples: list[LengthSample]) -> np.ndarray:
    return head_inputs(states, [sample.history for sample in samples])


def prompt_chars(samples: list[LengthSample]) -> np.ndarray:
    return np.asarray([len(s.prompt) for s in samples], float)


def previous_answer_chars(samples: list[LengthSample]) -> np.ndarray:
    """Each sample's previous answer length in characters (0 in a first round)."""
    return np.asarray([(s.history.earlier_answer_chars or (0,))[-1] for s in samples], float)


def evaluate_on(
    forecaster: Forecaster, samples: list[LengthSample], inputs: np.ndarray, train: list[LengthSample],
    val: list[LengthSample],
) -> dict[str, AccuracyReport]:
    """The model against baselines: the paper's two (the training mean, log-linear on prompt length) and
    log-linear on the previous answer's length (what the history features add on their own)."""
    buckets, truth = forecaster.buckets, lengths_of(samples)
    outputs = forecaster.head_outputs(inputs)
    estimates = forecaster.log_estimates(outputs)
    classes = predicted_buckets(forecaster.config.formulation, outputs, estimates, buckets)
    rows = {f"proxy model ({forecaster.config.formulation.value})": accuracy_report(truth, estimates, classes, buckets, forecaster.spread)}
    mean_log = np.full(len(samples), np.log1p(lengths_of(train).mean()))
    mean_spread = ResidualSpread.from_pairs(lengths_of(val), np.full(len(val), mean_log[0]))
    rows["training mean"] = accuracy_report(truth, mean_log, buckets.index(np.expm1(mean_log)), buckets, mean_spread)
    for name, predictor_of in (("linear on prompt length", prompt_chars), ("linear on previous answer length", previous_answer_chars)):
        intercept, slope = fit_log_linear(predictor_of(train), lengths_of(train))
        estimates_val = intercept + slope * np.log1p(predictor_of(val))
        estimates_test = intercept + slope * np.log1p(predictor_of(samples))
        spread = ResidualSpread.from_pairs(lengths_of(val), estimates_val)
        rows[name] = accuracy_report(truth, estimates_test, buckets.index(np.expm1(estimates_test)), buckets, spread)
    return rows


def train(
    config: TrainConfig, out_dir: Path, dataset: Path | None = None, progress: bool = True,
    embedding_cache: Path | None = None, heldout: bool = True,
) -> TrainResult:
    """Run both phases (phase 2 alone when ``config.phase1_samples`` is 0), calibrate on the validation
    split, score on the test split, save to ``out_dir``; with ``heldout``, the test forecasts too.

    ``embedding_cache`` is a folder keeping the frozen backbone's CLS states across runs (none: in memory).
    The artifact holds no timings, so the same config and data rewrite the same files.
    """
    started = time.monotonic()
    torch.manual_seed(config.seed)
    whole_splits = sample_splits(config, dataset, progress)
    # buckets at the quintiles of the whole training split, so subsets score against the same classes
    forecaster = initial_forecaster(config, lengths_of(whole_splits["train"]))
    splits = head_subsets(whole_splits, config)
    train_samples = splits["train"]
    formulation, buckets = forecaster.config.formulation, forecaster.buckets
    targets = training_targets(formulation, lengths_of(train_samples), buckets)
    forecaster.model.start_at(targets)
    phase1_losses = finetune_backbone(forecaster, config, train_samples[: config.phase1_samples], targets, progress)
    cache = EmbeddingCache.for_backbone(embedding_cache, forecaster.model.backbone, config.max_tokens, config.pooling)
    inputs = {
        split: inputs_of(cache.embed([s.prompt for s in samples], forecaster.embed, progress, f"embedding {split}"), samples)
        for split, samples in splits.items()
    }
    val_targets = training_targets(formulation, lengths_of(splits["val"]), buckets)
    phase1_head = copy.deepcopy(forecaster.model.head)

    def fit(rows: np.ndarray) -> dict[str, torch.Tensor]:
        """Phase 2 on the given training rows, starting from the phase-1 head."""
        head = copy.deepcopy(phase1_head)
        return fit_phase2(head, formulation, config, inputs["train"][rows], targets[rows], (inputs["val"], val_targets), progress)

    head_state = fit(np.arange(len(train_samples)))
    forecaster = calibrated(forecaster, head_state, inputs["val"], splits["val"])
    rows = evaluate_on(forecaster, splits["test"], inputs["test"], train_samples, splits["val"])
    curve = learning_curve(forecaster, fit, inputs, splits) if len(train_samples) > LEARNING_CURVE_SIZES[0] else []
    forecaster.config.metrics = {
        "test": {name: report.as_dict() for name, report in rows.items()},
        "phase1_losses": phase1_losses,
        "learning_curve": curve,
        "samples": {split: len(samples) for split, samples in splits.items()},
    }
    forecaster.save(out_dir)
    if heldout:
        write_heldout(out_dir / HELDOUT_FILE, splits["test"], forecaster.forecast_inputs(inputs["test"]))
    return TrainResult(forecaster, format_table(rows), time.monotonic() - started)


def finetune_backbone(
    forecaster: Forecaster, config: TrainConfig, samples: list[LengthSample], targets: torch.Tensor, progress: bool
) -> list[float]:
    """Phase 1 on ``samples`` (the first rows of ``targets``); none leaves the backbone as packaged."""
    if not samples:
        return []
    return finetune_whole(
        forecaster.model, forecaster.tokenizer, [s.prompt for s in samples], history_features([s.history for s in samples]),
        targets[: len(samples)],
        max_tokens=config.phase1_max_tokens, batch_size=config.batch_size, epochs=config.phase1_epochs,
        learning_rate=config.phase1_learning_rate, rng=np.random.default_rng(config.seed), progress=progress,
    )


def fit_phase2(
    head: torch.nn.Module, formulation: Formulation, config: TrainConfig, states: np.ndarray, targets: torch.Tensor,
    validation: tuple[np.ndarray, torch.Tensor], progress: bool = False,
) -> dict[str, torch.Tensor]:
    """Phase 2 as configured: ``head`` trained on frozen CLS states and history features, early-stopped on
    the validation split."""
    # one thread: a small head's ops are too small to split, and on busy cores the threads' hand-offs
    # made an epoch 40x slower (1.6 s against 0.04 s for 2,000 samples)
    with torch_threads(1):
        return fit_head(
            head, formulation, states, targets, epochs=config.phase2_epochs, learning_rate=config.phase2_learning_rate,
            seed=config.seed, progress=progress, validation=validation, patience=config.phase2_patience,
        )


def calibrated(
    forecaster: Forecaster, head_state: dict[str, torch.Tensor], val_inputs: np.ndarray, val: list[LengthSample]
) -> Forecaster:
    """The forecaster with this head, its spread taken from validation residuals."""
    candidate = forecaster.with_head(head_state, forecaster.spread)
    estimates = candidate.log_estimates(candidate.head_outputs(val_inputs))
    return forecaster.with_head(head_state, ResidualSpread.from_pairs(lengths_of(val), estimates))


def learning_curve(
    forecaster: Forecaster, fit: Callable[[np.ndarray], dict[str, torch.Tensor]],
    inputs: dict[str, np.ndarray], splits: dict[str, list[LengthSample]],
) -> list[dict[str, float]]:
    """Test accuracy and Kendall tau of phase-2 heads fitted on growing prefixes of the training set."""
    points = []
    for size in [size for size in LEARNING_CURVE_SIZES if size < len(splits["train"])] + [len(splits["train"])]:
        model = calibrated(forecaster, fit(np.arange(size)), inputs["val"], splits["val"])
        report = evaluate_on(model, splits["test"], inputs["test"], splits["train"], splits["val"])
        first = next(iter(report.values()))
        points.append({"train_samples": size, "accuracy": first.accuracy, "kendall_tau": first.kendall_tau})
    return points


def write_heldout(path: Path, samples: list[LengthSample], forecasts: list[LengthForecast]) -> None:
    """The test split with the model's forecasts, for the scheduling benchmark (``bench ssjf``)."""
    prompt_tokens = count_served_tokens()([sample.prompt for sample in samples])
    with path.open("w") as stream:
        for sample, forecast, tokens in zip(samples, forecasts, prompt_tokens):
            record = {
                "conversation_id": sample.conversation_id, "round": sample.round, "prompt_tokens": tokens,
                "output_tokens": sample.output_tokens, "forecast_tokens": forecast.mean,
                "forecast_p90": forecast.quantiles[90],
            }
            stream.write(json.dumps(record) + "\n")


def ensure_trained(directory: Path = DEFAULT_ARTIFACT_DIR, quick: bool = False) -> Path:
    """The artifact in ``directory``, trained first if it is not there yet or has an older format (the
    set-up step)."""
    if artifact_problem(directory) is not None:
        result = train(QUICK if quick else TrainConfig(), directory)
        print(result.table)
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None,
                        help=f"artifact folder to write (default {DEFAULT_ARTIFACT_DIR}; with --shipped, the package's)")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="tiny run (< 1 min) for tests and smoke checks")
    size.add_argument("--shipped", action="store_true",
                      help="rewrite the predictor the package ships: a head on the packaged MiniLM, frozen (~10 min)")
    parser.add_argument("--formulation", choices=[f.value for f in Formulation], default=None)
    parser.add_argument("--dataset", type=input_file, default=None, help="ShareGPT JSON (default: the packaged one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--castillo", type=input_file, default=None,
                        help="train the model-aware predictor on this CASTILLO-format file instead (train split; scored on validate)")
    parser.add_argument("--max-tokens", type=int, default=None, help="--castillo: MiniLM tokens read (the prompt's last)")
    parser.add_argument("--int8", action="store_true", help="--castillo: the backbone's Linear layers in dynamic int8 (faster)")
    parser.add_argument("--backbone", type=input_folder, default=None,
                        help="--castillo: fit the head on this fine-tuned MiniLM (python -m forethought.predict.finetune_castillo)")
    parser.add_argument("--backbone-layers", type=int, default=None,
                        help="--castillo: keep the backbone's first N transformer layers (default: all; the shipped predictor: 4)")
    parser.add_argument("--threads", type=int, default=None, help="--castillo: torch threads of the head fitting (default 2)")
    parser.add_argument("--validate-train-share", type=float, default=None,
                        help="--castillo: share of validate prompts that join training (default 0.5; the rest are scored)")
    parser.add_argument("--word-buckets", type=int, default=None,
                        help="--castillo: hash buckets of the word table over the whole prompt (default 131072; 0: none)")
    parser.add_argument("--rank-weight", type=float, default=None,
                        help="--castillo: weight of the pairwise ranking term beside the L1 loss (default: the config's)")
    parser.add_argument("--encoder-runtime", choices=[runtime.value for runtime in EncoderRuntime], default=None,
                        help="--castillo: what runs the int8 backbone's forward, for the head's fitting and its serving "
                             "(default: the config's; the shipped predictor: onnxruntime)")
    args = parser.parse_args(argv)
    if args.word_buckets is not None and args.word_buckets < 0:
        parser.error(f"--word-buckets must be 0 or more, got {args.word_buckets}")
    if args.rank_weight is not None and args.rank_weight < 0:
        parser.error(f"--rank-weight must be 0 or more, got {args.rank_weight}")
    if args.encoder_runtime == EncoderRuntime.ONNXRUNTIME.value and not (args.int8 or args.shipped):
        parser.error("--encoder-runtime onnxruntime runs an int8 backbone: add --int8 (--shipped has it)")
    if args.backbone_layers is not None and not 1 <= args.backbone_layers <= 6:
        parser.error(f"--backbone-layers must be 1..6 (MiniLM-L6's layers), got {args.backbone_layers}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.backbone is not None and artifact_problem(args.backbone) is None and not (args.int8 or args.shipped):
        parser.error(f"--backbone {args.backbone} is a predictor artifact, whose backbone is int8: add --int8")
    if args.castillo is not None:
        return castillo_main(args, parser)
    config = replace(QUICK if args.quick else SHIPPED if args.shipped else TrainConfig(), seed=args.seed)
    if args.formulation:
        config = replace(config, formulation=args.formulation)
    out = args.out or (SHIPPED_DIR if args.shipped else DEFAULT_ARTIFACT_DIR)
    embedding_cache = None if args.quick else EMBEDDINGS_DIR
    result = train(config, out, args.dataset, embedding_cache=embedding_cache, heldout=not args.shipped)
    print(result.table)
    print(f"\ntrained in {result.seconds:.0f} s; artifact: {out}")
    print(json.dumps(result.forecaster.config.metrics["samples"]))
    return 0


def castillo_main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from forethought.predict.train_castillo import SHIPPED_CASTILLO, CastilloConfig, train_castillo

    changes = {"max_tokens": args.max_tokens, "validate_train_share": args.validate_train_share, "backbone_int8": args.int8 or None,
               "backbone_dir": str(args.backbone) if args.backbone else None, "threads": args.threads,
               "word_buckets": args.word_buckets, "backbone_layers": args.backbone_layers,
               "rank_weight": args.rank_weight, "encoder_runtime": args.encoder_runtime}
    base = SHIPPED_CASTILLO if args.shipped else CastilloConfig()
    config = replace(base, seed=args.seed, **{name: value for name, value in changes.items() if value is not None})
    out = args.out or (SHIPPED_DIR if args.shipped else DEFAULT_ARTIFACT_DIR)
    started = time.perf_counter()
    try:
        _, table = train_castillo(args.castillo, out, config)
    except UnreadableArtifact as error:
        parser.exit(2, f"{parser.prog}: --backbone: {error}\n")
    print("each cell: forecast / ceiling (an oracle knowing each pair's mean length), scored validate prompts\n")
    print(table)
    print(f"\ntrained in {time.perf_counter() - started:.0f} s; artifact: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
