"""The backbone's forward on ONNX Runtime in dynamic int8, the runtime the shipped predictor serves with
(SSJF section 4.2, predictor overhead: a fifth off a forecast against torch's traced int8 forward, which
lets a fifth encoder layer serve within 10 ms; docs/predictor.md, Speed). Built from the float network
when a predictor is loaded: an artifact stores its int8 weights once, for either runtime."""

from __future__ import annotations

import copy
import logging
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from torch import nn

from forethought.predict.proxy import LastHiddenState


def int8_onnx_model(backbone: nn.Module) -> bytes:
    """``backbone`` (float32) as an ONNX graph whose Linear layers' matmuls ONNX Runtime's quantizer made
    dynamic int8: weights int8 per tensor, activations uint8 per call (torch's dynamic int8 keeps 7 bits of
    them); attention's matmuls and the embeddings stay float32, as under torch's. ``backbone`` is not changed."""
    # attention exported as its plain matmuls: the graph of torch's fused attention kernel took twice as long
    # over 512 tokens (docs/predictor.md, Speed)
    backbone = copy.deepcopy(backbone)
    backbone.set_attn_implementation("eager")
    example_ids = torch.ones((2, 4), dtype=torch.long)
    example_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    axes = {0: "batch", 1: "tokens"}
    with tempfile.TemporaryDirectory() as folder:
        float_path, int8_path = Path(folder) / "float.onnx", Path(folder) / "int8.onnx"
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's shape-branch and deprecation warnings, as in proxy.traced_encoder
            torch.onnx.export(
                LastHiddenState(backbone.eval()), (example_ids, example_mask), str(float_path), dynamo=False, opset_version=17,
                input_names=["input_ids", "attention_mask"], output_names=["states"],
                dynamic_axes={"input_ids": axes, "attention_mask": axes, "states": axes},
            )
        with _without_preprocessing_advice():
            quantize_dynamic(str(float_path), str(int8_path), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"],
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        return int8_path.read_bytes()


@contextmanager
def _without_preprocessing_advice() -> Iterator[None]:
    """Drops the quantizer's root-logger advice to pre-process the graph first, logged on every call: its
    shape inference and fusions leave nothing to gain on a graph exported from torch."""
    def drop(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Please consider to run pre-processing")

    root = logging.getLogger()
    root.addFilter(drop)
    try:
        yield
    finally:
        root.removeFilter(drop)


class OnnxEncoder:
    """An ONNX Runtime session over ``int8_onnx_model``'s graph, called as ``proxy.traced_encoder``'s graph is:
    (input ids, attention mask) -> the last hidden state. ``threads`` intra-op threads (0: ONNX Runtime's
    default, one per physical core), which spin between calls (its default)."""

    def __init__(self, model: bytes, threads: int = 0) -> None:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # the tokenizer's ids and mask are int64 already: no copy on the forecast path
        feeds = {"input_ids": np.asarray(input_ids.numpy(), np.int64), "attention_mask": np.asarray(attention_mask.numpy(), np.int64)}
        return torch.from_numpy(self.session.run(None, feeds)[0])
