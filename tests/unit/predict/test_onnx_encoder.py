from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch
from forethought.predict.artifact import int8_backbone
from forethought.predict.onnx_encoder import OnnxEncoder, int8_onnx_model
from forethought.predict.proxy import LastHiddenState, encode_prompts, first_layers, packaged_backbone_dir

PROMPTS = ["Write a short poem about the sea.",
           "Explain, step by step and with an example in Python, how a binary search tree keeps its keys in order."]


@pytest.fixture(scope="module")
def two_layers() -> tuple[torch.nn.Module, Any]:
    from transformers import AutoModel, AutoTokenizer

    directory = packaged_backbone_dir()
    return first_layers(AutoModel.from_pretrained(str(directory)), 2).eval(), AutoTokenizer.from_pretrained(str(directory))


def pooled(states: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
    weights = mask.unsqueeze(-1).float()
    return ((states * weights).sum(1) / weights.sum(1)).numpy()


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_the_onnx_int8_forward_is_about_as_close_to_float32_as_torchs_int8(two_layers: tuple[torch.nn.Module, Any]) -> None:
    backbone, tokenizer = two_layers
    inputs = encode_prompts(tokenizer, PROMPTS, 64)
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    assert mask[0].sum() < mask[1].sum()  # the first row is padded: the mask must be applied
    with torch.no_grad():
        exact = pooled(LastHiddenState(backbone)(ids, mask), mask)
        on_torch_int8 = pooled(LastHiddenState(int8_backbone(copy.deepcopy(backbone)))(ids, mask), mask)
    encoder = OnnxEncoder(int8_onnx_model(backbone), threads=1)
    states = encoder(ids, mask)
    assert states.shape == (2, ids.shape[1], backbone.config.hidden_size)
    on_onnx = pooled(states, mask)
    assert cosines(on_onnx, exact).min() > 0.95  # torch's int8 of these two layers: 0.97
    # int8, not float32 under another name, and no further from float32 than twice torch's int8
    onnx_error, torch_error = np.abs(on_onnx - exact).mean(), np.abs(on_torch_int8 - exact).mean()
    assert 1e-5 < onnx_error < 2 * torch_error
    # a padded row reads as its prompt alone does, but for the batch's activation range (torch's int8: 0.992);
    # with the pad tokens attended it would read 0.90
    alone = encode_prompts(tokenizer, PROMPTS[:1], 64)
    single = pooled(encoder(alone["input_ids"], alone["attention_mask"]), alone["attention_mask"])
    assert cosines(single, on_onnx[:1])[0] > 0.99
