"""``python -m forethought.models.prepare [--out DIR] [--dtype bfloat16|float32]``: prepares the demo model.

Converts SmolLM2-135M-Instruct from its GGUF package into a cached Hugging Face folder once (DESIGN.md,
Engines) and prints where it is and how long it took.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from forethought.models.smollm2 import SMOLLM2_NAME, prepare_smollm2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=f"Prepare {SMOLLM2_NAME} as a Hugging Face folder.")
    parser.add_argument("--out", type=Path, default=None, help="parent folder (default: model cache)")
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    folder = prepare_smollm2(args.out, args.dtype)
    print(f"{folder} ready in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
