from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from forethought.predict.embedding_cache import EmbeddingCache, backbone_fingerprint


class CountingEmbed:
    """Embeds a prompt as (length, first character code); counts the prompts it was asked for."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, prompts: list[str]) -> np.ndarray:
        self.calls.append(list(prompts))
        return np.asarray([[len(p), ord(p[0])] for p in prompts], dtype=np.float32)


def test_states_come_back_in_order_and_each_prompt_is_embedded_once(tmp_path: Path) -> None:
    embed = CountingEmbed()
    cache = EmbeddingCache(tmp_path / "states.npz")
    states = cache.embed(["ccc", "a", "bb", "a"], embed)
    assert states.tolist() == [[3, 99], [1, 97], [2, 98], [1, 97]]
    assert embed.calls == [["a", "bb", "ccc"]]  # shortest first, duplicates once


def test_a_rerun_reads_the_states_from_disk(tmp_path: Path) -> None:
    EmbeddingCache(tmp_path / "states.npz").embed(["x", "yy"], CountingEmbed())
    embed = CountingEmbed()
    states = EmbeddingCache(tmp_path / "states.npz").embed(["yy", "x", "zzz"], embed)
    assert states.tolist() == [[2, 121], [1, 120], [3, 122]]
    assert embed.calls == [["zzz"]]


def test_fingerprint_changes_when_the_weights_change(tmp_path: Path) -> None:
    layer = torch.nn.Linear(3, 2)
    before = backbone_fingerprint(layer)
    assert backbone_fingerprint(layer) == before
    with torch.no_grad():
        layer.weight[0, 0] += 1.0
    assert backbone_fingerprint(layer) != before
    assert EmbeddingCache.for_backbone(tmp_path, layer, 256, "cls").path == tmp_path / f"{backbone_fingerprint(layer)}-256-cls.npz"
    assert EmbeddingCache.for_backbone(tmp_path, layer, 256, "mean").path == tmp_path / f"{backbone_fingerprint(layer)}-256-mean.npz"
    # another runtime's int8 states are kept apart from torch's
    on_onnx = EmbeddingCache.for_backbone(tmp_path, layer, 256, "mean", "onnxruntime").path
    assert on_onnx == tmp_path / f"{backbone_fingerprint(layer)}-256-mean-onnxruntime.npz"
    assert EmbeddingCache.for_backbone(None, layer, 256, "cls").path is None
