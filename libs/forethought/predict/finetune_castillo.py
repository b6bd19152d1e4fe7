"""Phase 1 on CASTILLO (SSJF section 3.1): fine-tune MiniLM-L6 together with a model-aware head on the
multi-model length labels, as SSJF fine-tunes BERT with its head.

    python -m forethought.predict.finetune_castillo --castillo FILE --out DIR [--max-tokens 32] [--epochs 3]
        [--device cuda] [--score]

A step reads a batch of distinct prompts once through the backbone and scores every (prompt, model) pair
of those prompts through the head (the served model's one-hot, or the any-model slot for a share of
rows), with the L1 loss against each of the pair's answers in log space; ``rank_weight`` adds a pairwise
logistic term that orders a batch's pairs of one model by their mean length (what Kendall tau rewards).
The word embeddings stay frozen: a backbone fine-tuned this way differs from the packaged MiniLM only in
its encoder, which is what the shipped artifact stores (``BackboneSource.DELTA``). Without a GPU, a run can
start from a predictor artifact's backbone (``--init-backbone``, its int8 weights dequantized) and train
only its last layers (``--train-layers``), the layers below running without gradients.

The output folder is a Hugging Face backbone (the epoch with the least held-out loss, checked after each
epoch and kept there, so the run can be stopped early) with that epoch's head beside it;
``forethought train-predictor --castillo FILE --backbone DIR`` then fits the shipped head on its (int8)
states, phase 2. Splits are those of ``train_castillo``: training never reads the scored half of validate;
``--score`` scores phase 1 alone there once training is over (float32, no word table), which is how
windows and runs compare without a phase 2 each.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from forethought.arguments import input_file
from forethought.predict.artifact import artifact_config, artifact_problem, float_backbone
from forethought.predict.castillo import LengthPair, castillo_splits, load_pairs
from forethought.predict.evaluate import castillo_rows
from forethought.predict.fitting import length_sorted_batches, torch_threads
from forethought.predict.history import HISTORY_FEATURES
from forethought.predict.metrics import PairReport, format_pair_table
from forethought.predict.proxy import (
    Formulation,
    Pooling,
    ProxyLengthModel,
    encode_prompts,
    first_layers,
    packaged_backbone_dir,
    with_packaged_layers,
)
from forethought.predict.served_models import model_features, model_input_width
from forethought.predict.train_castillo import answer_l1, answer_targets, as_any_model, pairwise_rank_loss

PHASE1_HEAD = "phase1_head.safetensors"  # the best epoch's head, beside its backbone: phase 1 scored alone


@dataclass(frozen=True)
class FinetuneConfig:
    max_tokens: int = 32
    epochs: int = 3
    batch_prompts: int = 32  # distinct prompts a step; each brings all its models' pairs
    learning_rate: float = 5e-5  # the backbone's; the fresh head's is 30x
    head_hidden: int = 256
    rank_weight: float = 0.5
    rank_margin: float = 0.1  # pairs whose log mean lengths differ by less are not ordered
    any_model_share: float = 0.2
    holdout_share: float = 0.1
    validate_train_share: float = 0.5
    threads: int = 2
    device: str = "cpu"  # where the backbone and head train ("cuda" on a GPU: an epoch in seconds)
    # a backbone this module wrote, or a predictor artifact's (dequantized), to train further (its head starts
    # afresh); empty: the packaged MiniLM
    init_backbone: str = ""
    # keep the first N transformer layers before training (0: all); past the starting backbone's own, the
    # packaged MiniLM's next layers are stacked on
    backbone_layers: int = 0
    # train only the last N transformer layers and the head (0: the whole encoder): the layers below run
    # without gradients, which makes a 512-token epoch affordable on a CPU
    train_layers: int = 0
    seed: int = 0


class PairBatches:
    """The pairs grouped by prompt: the prompts in order and, per prompt, the rows of its pairs."""

    def __init__(self, pairs: list[LengthPair], models: tuple[str, ...]) -> None:
        self.pairs = pairs
        self.prompts = list(dict.fromkeys(pair.prompt for pair in pairs))
        position = {prompt: index for index, prompt in enumerate(self.prompts)}
        self.rows: list[list[int]] = [[] for _ in self.prompts]
        for row, pair in enumerate(pairs):
            self.rows[position[pair.prompt]].append(row)
        self.targets, self.mask = answer_targets(pairs)
        self.log_means = torch.as_tensor([float(np.mean(np.log1p(pair.output_sizes))) for pair in pairs])
        column = {model: index for index, model in enumerate(models)}
        self.groups = torch.as_tensor([column[pair.model] for pair in pairs])
        self.features = torch.as_tensor(model_features(models, [pair.model for pair in pairs], [pair.prompt for pair in pairs]))

    def to(self, device: torch.device) -> PairBatches:
        """These batches with their tensors on ``device`` (the prompts stay text)."""
        for name in ("targets", "mask", "log_means", "groups", "features"):
            setattr(self, name, getattr(self, name).to(device))
        return self

    def head_inputs(self, states: torch.Tensor, prompt_rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Head input rows for the pairs of the prompts ``prompt_rows`` (whose text states are ``states``),
        and those pairs' rows, on the states' device."""
        device = states.device
        owners = torch.as_tensor([slot for slot, prompt in enumerate(prompt_rows) for _ in self.rows[prompt]], device=device)
        rows = torch.as_tensor([row for prompt in prompt_rows for row in self.rows[prompt]], device=device)
        history = torch.zeros(len(rows), HISTORY_FEATURES, device=device)
        return torch.cat([states[owners], history, self.features[rows]], dim=1), rows


def encoded_on(tokenizer: Any, prompts: list[str], max_tokens: int, device: torch.device) -> dict[str, torch.Tensor]:
    return {name: tensor.to(device) for name, tensor in encode_prompts(tokenizer, prompts, max_tokens).items()}


def held_out_loss(model: ProxyLengthModel, tokenizer: Any, batches: PairBatches, models: int, config: FinetuneConfig) -> float:
    """Mean of the model-aware and the any-model L1 over ``batches`` (no dropout, no gradients); ``models``:
    how many the head knows."""
    model.eval()
    device = next(model.parameters()).device
    total = [0.0, 0.0]
    with torch.inference_mode():
        for start in range(0, len(batches.prompts), 64):
            prompt_rows = np.arange(start, min(start + 64, len(batches.prompts)))
            encoded = encoded_on(tokenizer, [batches.prompts[row] for row in prompt_rows], config.max_tokens, device)
            inputs, rows = batches.head_inputs(model.embed(**encoded), prompt_rows)
            weight = float(batches.mask[rows].sum())
            total[0] += float(answer_l1(model.head(inputs), batches.targets[rows], batches.mask[rows])) * weight
            any_inputs = as_any_model(inputs, torch.arange(len(inputs), device=device), models)
            total[1] += float(answer_l1(model.head(any_inputs), batches.targets[rows], batches.mask[rows])) * weight
    model.train()
    return 0.5 * (total[0] + total[1]) / float(batches.mask.sum())


def finetune(path: Path, out_dir: Path, config: FinetuneConfig = FinetuneConfig(), log: Any = print) -> dict[str, Any]:
    """Fine-tune on ``path``'s training pairs; the best epoch's backbone is saved to ``out_dir`` after each
    epoch that improves the held-out loss. Returns the run's record (also ``out_dir/finetune.json``)."""
    from transformers import AutoTokenizer

    pairs = load_pairs(path)
    splits = castillo_splits(pairs, config.validate_train_share, config.holdout_share)
    models = tuple(sorted({pair.model for pair in splits["fit"]}))
    device = torch.device(config.device)
    fit, held = PairBatches(splits["fit"], models).to(device), PairBatches(splits["calibration"], models).to(device)
    backbone_dir = packaged_backbone_dir()
    tokenizer = AutoTokenizer.from_pretrained(str(backbone_dir))
    backbone = initial_backbone(config)
    torch.manual_seed(config.seed)  # after loading, which may draw: the fresh head starts the same for a seed
    model = ProxyLengthModel(backbone, Formulation.REG_L1, config.head_hidden, Pooling.MEAN,
                             model_input_width(models)).to(device)
    model.start_at(fit.log_means)
    optimizer = torch.optim.AdamW([
        {"params": [p for p in model.backbone.parameters() if p.requires_grad], "lr": config.learning_rate},
        {"params": model.head.parameters(), "lr": config.learning_rate * 30},
    ])
    token_counts = [len(ids) for ids in tokenizer(fit.prompts, truncation=True, max_length=config.max_tokens)["input_ids"]]
    rng = np.random.default_rng(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    record: dict[str, Any] = {"config": asdict(config), "data": Path(path).name, "fit_prompts": len(fit.prompts),
                              "held_out_prompts": len(held.prompts), "epochs": []}
    if config.init_backbone:
        record["init_training"] = starting_record(Path(config.init_backbone))
    best = float("inf")
    with torch_threads(config.threads):
        record["epochs"].append({"epoch": 0, "held_out_l1": held_out_loss(model, tokenizer, held, len(models), config)})
        log(json.dumps(record["epochs"][-1]))
        model.train()
        for epoch in range(1, config.epochs + 1):
            started, wall_started, losses = time.process_time(), time.monotonic(), []
            batches = length_sorted_batches(token_counts, config.batch_prompts, rng)
            for step, prompt_rows in enumerate(batches, start=1):
                encoded = encoded_on(tokenizer, [fit.prompts[row] for row in prompt_rows], config.max_tokens, device)
                inputs, rows = fit.head_inputs(model.embed(**encoded), prompt_rows)
                any_model = (torch.rand(len(inputs), generator=generator) < config.any_model_share).to(device)
                inputs = as_any_model(inputs, any_model, len(models))
                outputs = model.head(inputs)
                loss = answer_l1(outputs, fit.targets[rows], fit.mask[rows])
                if config.rank_weight:
                    ranking = pairwise_rank_loss(outputs[:, 0], fit.log_means[rows], fit.groups[rows], config.rank_margin)
                    loss = loss + config.rank_weight * ranking
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
                if step % 20 == 0:
                    log(f"epoch {epoch} step {step}/{len(batches)} loss {np.mean(losses[-20:]):.4f} "
                        f"cpu {(time.process_time() - started) / step:.2f} s/step")
            held_l1 = held_out_loss(model, tokenizer, held, len(models), config)
            record["epochs"].append({"epoch": epoch, "train_loss": float(np.mean(losses)), "held_out_l1": held_l1,
                                     "cpu_s": time.process_time() - started, "wall_s": time.monotonic() - wall_started})
            log(json.dumps(record["epochs"][-1]))
            if held_l1 < best:
                best = held_l1
                record["best_epoch"] = epoch
                save_backbone(model, tokenizer, out_dir, record)
    return record


def initial_backbone(config: FinetuneConfig) -> torch.nn.Module:
    """The backbone phase 1 starts from, cut or grown to ``backbone_layers``, with what it does not train frozen: the
    word embeddings always (the shipped delta leaves them out), and with ``train_layers`` everything below
    the last N layers."""
    from transformers import AutoModel

    source = config.init_backbone or str(packaged_backbone_dir())
    backbone = float_backbone(Path(source)) if artifact_problem(Path(source)) is None else AutoModel.from_pretrained(source)
    if config.backbone_layers > len(backbone.encoder.layer):
        backbone = with_packaged_layers(backbone, config.backbone_layers)
    elif config.backbone_layers:
        backbone = first_layers(backbone, config.backbone_layers)
    frozen = [backbone.embeddings.word_embeddings]
    if config.train_layers:
        if not 0 < config.train_layers <= len(backbone.encoder.layer):
            raise ValueError(f"train_layers must be 1..{len(backbone.encoder.layer)}, got {config.train_layers}")
        frozen = [backbone.embeddings, *list(backbone.encoder.layer)[: -config.train_layers]]
    for module in frozen:
        module.requires_grad_(False)
    return backbone


def starting_layers(init_backbone: Path | None) -> int:
    """Transformer layers of the backbone phase 1 starts from: a predictor artifact's as it serves, a
    folder this command wrote, or the packaged MiniLM's (``init_backbone`` None)."""
    source = init_backbone or packaged_backbone_dir()
    if artifact_problem(source) is None:
        return artifact_config(source).backbone_layers or starting_layers(None)
    return int(json.loads((source / "config.json").read_text())["num_hidden_layers"])


def starting_record(init_backbone: Path) -> dict[str, Any]:
    """How the backbone a run continues from was trained: a predictor artifact's training record, or the
    record of the run that wrote the folder (empty for a folder without one)."""
    if artifact_problem(init_backbone) is None:
        return artifact_config(init_backbone).training
    written = init_backbone / "finetune.json"
    return json.loads(written.read_text()) if written.is_file() else {}


def phase1_rows(backbone_dir: Path, path: Path, config: FinetuneConfig) -> dict[str, tuple[PairReport, PairReport]]:
    """Phase 1 alone (``backbone_dir``'s backbone and head, float32, at ``config``'s window) scored on
    ``path``'s scored validate pairs: ``evaluate``'s reports per model and their mean; a forecast's class
    is its point's (phase 1 fits no spreads)."""
    from transformers import AutoModel, AutoTokenizer

    splits = castillo_splits(load_pairs(path), config.validate_train_share, config.holdout_share)
    models = tuple(sorted({pair.model for pair in splits["fit"]}))
    device = torch.device(config.device)
    scored = PairBatches(splits["scored"], models).to(device)
    model = ProxyLengthModel(AutoModel.from_pretrained(str(backbone_dir)), Formulation.REG_L1, config.head_hidden,
                             Pooling.MEAN, model_input_width(models))
    model.head.load_state_dict(load_file(str(Path(backbone_dir) / PHASE1_HEAD)))
    model = model.to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(backbone_dir))
    log_estimates = np.zeros(len(scored.pairs))
    with torch.inference_mode():
        for start in range(0, len(scored.prompts), 64):
            prompt_rows = np.arange(start, min(start + 64, len(scored.prompts)))
            encoded = encoded_on(tokenizer, [scored.prompts[row] for row in prompt_rows], config.max_tokens, device)
            inputs, rows = scored.head_inputs(model.embed(**encoded), prompt_rows)
            log_estimates[rows.cpu().numpy()] = model.head(inputs)[:, 0].cpu().numpy()
    return castillo_rows(scored.pairs, np.expm1(log_estimates))


def save_backbone(model: ProxyLengthModel, tokenizer: Any, out_dir: Path, record: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    model.backbone.save_pretrained(str(out_dir))
    save_file({name: tensor.detach().cpu().contiguous() for name, tensor in model.head.state_dict().items()},
              str(out_dir / PHASE1_HEAD))
    tokenizer.save_pretrained(str(out_dir))
    (out_dir / "finetune.json").write_text(json.dumps(record, indent=2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--castillo", type=input_file, required=True, help="a CASTILLO-format file (train and validate splits)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the fine-tuned backbone")
    defaults = FinetuneConfig()
    parser.add_argument("--max-tokens", type=int, default=defaults.max_tokens)
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--rank-weight", type=float, default=defaults.rank_weight)
    parser.add_argument("--threads", type=int, default=defaults.threads)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                        help="where to train: cuda (the default where a GPU is present) or cpu")
    parser.add_argument("--init-backbone", type=Path, default=None,
                        help="continue from a backbone this command wrote, or a predictor artifact's (its int8 weights dequantized)")
    parser.add_argument("--backbone-layers", type=int, default=0,
                        help="keep the backbone's first N transformer layers (0: all); past its own, stack the packaged MiniLM's next ones")
    parser.add_argument("--train-layers", type=int, default=0,
                        help="train only the last N transformer layers and the head (0: the whole encoder)")
    parser.add_argument("--score", action="store_true", help="then score phase 1 alone on the scored validate prompts")
    args = parser.parse_args(argv)
    if args.rank_weight < 0:
        parser.error(f"--rank-weight must be 0 or more, got {args.rank_weight}")
    if args.init_backbone is not None and not (args.init_backbone / "config.json").is_file():
        parser.error(f"--init-backbone must be a folder this command wrote or a predictor artifact, got {args.init_backbone}")
    layers, packaged = starting_layers(args.init_backbone), starting_layers(None)
    if not 0 <= args.backbone_layers <= packaged:
        parser.error(f"--backbone-layers must be 0 (all) or 1..{packaged} (past the starting backbone's {layers}, "
                     f"the packaged MiniLM's next layers), got {args.backbone_layers}")
    if not 0 <= args.train_layers <= (args.backbone_layers or layers):
        parser.error(f"--train-layers must be 0 (all) or 1..{args.backbone_layers or layers} (the layers kept), got {args.train_layers}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = FinetuneConfig(max_tokens=args.max_tokens, epochs=args.epochs, learning_rate=args.learning_rate,
                            rank_weight=args.rank_weight, threads=args.threads, device=args.device,
                            init_backbone=str(args.init_backbone or ""), backbone_layers=args.backbone_layers,
                            train_layers=args.train_layers)
    record = finetune(args.castillo, args.out, config, log=lambda line: print(line, flush=True))
    print(f"best epoch {record.get('best_epoch')}; backbone: {args.out}")
    if args.score:
        print("\nphase 1 alone, each cell forecast / ceiling, scored validate prompts\n")
        print(format_pair_table(phase1_rows(args.out, args.castillo, config)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
