"""Fitting the proxy model's weights in the two fine-tuning phases of SSJF section 3.1: (1) backbone and
head together, (2) head only.

The torch loops alone: ``train`` builds an artifact around them offline. Phase 2 runs on cached CLS
states (the backbone is frozen), so it is cheap enough to repeat online when observed lengths arrive
(``Predictor.refit``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from forethought.predict.proxy import (
    Formulation,
    ProxyLengthModel,
    encode_prompts,
    head_loss,
)


def length_sorted_batches(token_counts: Sequence[int], batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Batches of similar-length prompts (little padding), in shuffled order."""
    order = np.argsort(np.asarray(token_counts), kind="stable")
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


def finetune_whole(
    model: ProxyLengthModel,
    tokenizer: Any,
    prompts: Sequence[str],
    history: np.ndarray,
    targets: torch.Tensor,
    *,
    max_tokens: int,
    batch_size: int,
    epochs: int,
    learning_rate: float,
    rng: np.random.Generator,
    progress: bool = True,
) -> list[float]:
    """Phase 1: update backbone and head; ``history`` holds each prompt's history features (rows).
    Returns the mean loss of each epoch."""
    token_counts = [len(ids) for ids in tokenizer(list(prompts), truncation=True, max_length=max_tokens)["input_ids"]]
    optimizer = torch.optim.AdamW(
        [
            {"params": model.backbone.parameters(), "lr": learning_rate},
            {"params": model.head.parameters(), "lr": learning_rate * 30},  # the fresh head learns faster
        ]
    )
    history_rows = torch.as_tensor(history, dtype=torch.float32)
    model.train()
    epoch_losses = []
    for epoch in range(epochs):
        batches = length_sorted_batches(token_counts, batch_size, rng)
        losses = []
        bar = tqdm(batches, desc=f"phase 1 (backbone+head) epoch {epoch + 1}/{epochs}", disable=not progress)
        for batch in bar:
            encoded = encode_prompts(tokenizer, [prompts[i] for i in batch], max_tokens)
            rows = torch.as_tensor(batch)
            loss = head_loss(model.formulation, model(**encoded, history=history_rows[rows]), targets[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}")
        epoch_losses.append(float(np.mean(losses)))
    model.eval()
    return epoch_losses


def fit_head(
    head: torch.nn.Module,
    formulation: Formulation,
    inputs: np.ndarray,
    targets: torch.Tensor,
    *,
    epochs: int,
    learning_rate: float,
    batch_size: int = 64,
    seed: int = 0,
    progress: bool = False,
    validation: tuple[np.ndarray, torch.Tensor] | None = None,
    patience: int = 15,
) -> dict[str, torch.Tensor]:
    """Phase 2 (and online refit): train ``head`` in place on ``inputs`` (frozen CLS states and history
    features, ``history.head_inputs``); returns its weights.

    With ``validation`` (states, targets) the weights of the epoch with the lowest validation loss are
    kept, and training stops after ``patience`` epochs without improvement.
    """
    generator = torch.Generator().manual_seed(seed)
    features = torch.as_tensor(inputs, dtype=torch.float32)
    optimizer = torch.optim.AdamW(head.parameters(), lr=learning_rate)
    best_loss, best_state, stale = float("inf"), snapshot(head), 0
    bar = tqdm(range(epochs), desc="phase 2 (head only)", disable=not progress)
    for _ in bar:
        head.train()
        for batch in torch.randperm(len(features), generator=generator).split(batch_size):
            loss = head_loss(formulation, head(features[batch]), targets[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if validation is None:
            continue
        held_out = validation_loss(head, formulation, *validation)
        bar.set_postfix(val_loss=f"{held_out:.4f}")
        best_loss, best_state, stale = (held_out, snapshot(head), 0) if held_out < best_loss else (best_loss, best_state, stale + 1)
        if stale >= patience:
            break
    if validation is not None:
        head.load_state_dict(best_state)
    head.eval()
    return snapshot(head)


@torch.inference_mode()
def validation_loss(head: torch.nn.Module, formulation: Formulation, inputs: np.ndarray, targets: torch.Tensor) -> float:
    head.eval()
    return float(head_loss(formulation, head(torch.as_tensor(inputs, dtype=torch.float32)), targets))


def snapshot(head: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in head.state_dict().items()}


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run torch ops on ``count`` threads, then restore the setting (process-wide while it lasts)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
