"""Regenerates the Python code of the contract: protos/forethought/v1/*.proto -> libs/forethought/v1/.

Run from anywhere: `python scripts/generate_protos.py`. `--out DIR` writes elsewhere (the staleness
test compares a fresh generation with the committed files).
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

REPO = Path(__file__).resolve().parent.parent
PROTO_ROOT = REPO / "protos"
DEFAULT_OUT = REPO / "libs"


def generate(out_root: Path) -> list[Path]:
    """Generates message, stub and type-stub modules under ``out_root/forethought/v1``."""
    protos = sorted(PROTO_ROOT.glob("forethought/v1/*.proto"))
    well_known = str(resources.files("grpc_tools") / "_proto")
    (out_root / "forethought" / "v1").mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *(str(p.relative_to(PROTO_ROOT)) for p in protos),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed")
    return sorted((out_root / "forethought" / "v1").glob("*_pb2*.py*"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="root folder of the output")
    written = generate(parser.parse_args().out)
    print(f"generated {len(written)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
