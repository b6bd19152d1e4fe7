"""Text states (CLS or mean-pooled) of a frozen backbone, cached on disk (SSJF section 3.1, phase 2 of
fine-tuning).

Phase 2 trains only the head, so each training prompt needs one backbone forward, ever: the states are
stored per backbone (a fingerprint of its weights), token window and pooling, and a rerun, another head
formulation or a longer phase 2 reuses them. The file is rewritten atomically every ``flush_every``
new states, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

Embed = Callable[[list[str]], np.ndarray]


def backbone_fingerprint(backbone: torch.nn.Module) -> str:
    """Short hash of the backbone's weights: a fine-tuned backbone never reuses another's states."""
    digest = hashlib.blake2b(digest_size=8)
    for name, value in sorted(backbone.state_dict().items()):
        digest.update(name.encode())
        for tensor in _tensors(value):
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def _tensors(value: object) -> list[torch.Tensor]:
    """The plain tensors in a state-dict value: an int8 layer keeps (quantized weight, bias) tuples."""
    if isinstance(value, torch.Tensor):
        return [value.int_repr() if value.is_quantized else value]
    if isinstance(value, tuple | list):
        return [tensor for item in value for tensor in _tensors(item)]
    return []


def prompt_digest(prompt: str) -> str:
    return hashlib.blake2b(prompt.encode(), digest_size=12).hexdigest()


class EmbeddingCache:
    """prompt -> text state for one (backbone, token window, pooling), persisted as
    ``<dir>/<fingerprint>-<tokens>-<pooling>.npz``."""

    def __init__(self, path: Path | None, flush_every: int = 2048) -> None:
        self.path = path
        self.flush_every = flush_every
        self._rows: dict[str, np.ndarray] = {}
        if path is not None and path.exists():
            with np.load(path) as stored:
                self._rows = dict(zip(stored["keys"].tolist(), stored["vectors"]))

    @classmethod
    def for_backbone(
        cls, directory: Path | None, backbone: torch.nn.Module, max_tokens: int, pooling: str, runtime: str = "torch",
    ) -> EmbeddingCache:
        """The cache of ``backbone``'s states at a window and pooling, as ``runtime`` computes them (another
        runtime's int8 arithmetic gives other states)."""
        if directory is None:
            return cls(None)
        suffix = "" if runtime == "torch" else f"-{runtime}"
        return cls(Path(directory) / f"{backbone_fingerprint(backbone)}-{max_tokens}-{pooling}{suffix}.npz")

    def __len__(self) -> int:
        return len(self._rows)

    def embed(self, prompts: Sequence[str], embed: Embed, progress: bool = False, desc: str = "embedding") -> np.ndarray:
        """States of ``prompts`` (rows, in order); missing ones computed by ``embed``, shortest first."""
        keys = [prompt_digest(prompt) for prompt in prompts]
        unseen = {key: prompt for key, prompt in zip(keys, prompts) if key not in self._rows}
        missing = sorted(unseen.items(), key=lambda item: len(item[1]))
        step, unsaved = 64, 0
        for start in tqdm(range(0, len(missing), step), desc=desc, disable=not progress or not missing):
            chunk = missing[start : start + step]
            self._rows.update(zip([key for key, _ in chunk], embed([prompt for _, prompt in chunk])))
            unsaved += len(chunk)
            if unsaved >= self.flush_every:
                self.flush()
                unsaved = 0
        if unsaved:
            self.flush()
        return np.stack([self._rows[key] for key in keys]) if keys else np.zeros((0, 0), np.float32)

    def flush(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_name(f".{self.path.stem}-{os.getpid()}.npz")
        np.savez(staging, keys=np.asarray(list(self._rows)), vectors=np.stack(list(self._rows.values())))
        os.replace(staging, self.path)
