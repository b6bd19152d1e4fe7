"""The predictor shipped in the package, and which predictor to load (SSJF section 3.1).

The package carries a model-aware two-layer head on MiniLM-L6 fine-tuned on CASTILLO (both phases, the
prompt's last 512 tokens through the encoder's first five layers, run in int8 on ONNX Runtime; the
fine-tuned encoder stored as an int8 delta over the packaged MiniLM, ``BackboneSource.DELTA``), so SSJF
orders requests for the served model on a fresh install (docs/predictor.md says how it is rebuilt). A
predictor trained by ``forethought train-predictor`` into the cache is taken to be the operator's choice,
so once one of the current artifact format is there, it is the one loaded.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from forethought.cache import PREDICTOR_DIR
from forethought.predict.artifact import BackboneSource, Forecaster, UnreadableArtifact, artifact_problem

SHIPPED_DIR = Path(__file__).resolve().parent / "shipped_head"
"""The shipped artifact: config.json, calibration.json, head.safetensors and backbone.safetensors (the int8 delta)."""


@dataclass(frozen=True)
class PredictorChoice:
    """The artifact folder to load, and one line saying which predictor it is (for logs)."""

    directory: Path
    description: str


def predictor_folder(text: str) -> Path:
    """An argparse type: a folder holding a predictor this version can load, as far as its config shows."""
    try:
        return resolve_predictor(Path(text)).directory
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def load_model_flag(parser: argparse.ArgumentParser, explicit: Path | None) -> tuple[PredictorChoice, Forecaster]:
    """The predictor a command's ``--model`` names (``predictor_folder`` checked its config), loaded; a
    folder whose files do not load ends the command with status 2 and one line naming the flag."""
    choice = resolve_predictor(explicit)
    try:
        return choice, Forecaster.load(choice.directory)
    except UnreadableArtifact as error:
        parser.exit(2, f"{parser.prog}: --model: {error}\n")


def resolve_predictor(explicit: Path | None = None, fine_tuned: Path = PREDICTOR_DIR) -> PredictorChoice:
    """The predictor to load: ``explicit`` if given, else the fine-tuned one in ``fine_tuned`` when it holds
    an artifact of the current format, else the shipped one.

    Raises:
        ValueError: ``explicit`` holds no artifact this version can load (the message says why).
    """
    if explicit is not None:
        directory = Path(explicit).expanduser()
        problem = artifact_problem(directory)
        if problem is not None:
            raise ValueError(f"{problem}: `forethought train-predictor` trains one")
        name = "shipped predictor" if directory.resolve() == SHIPPED_DIR else "predictor"
        return PredictorChoice(directory, f"{name} in {directory}")
    problem = artifact_problem(fine_tuned)
    if problem is None:
        return PredictorChoice(fine_tuned, f"fine-tuned predictor in {fine_tuned}")
    return PredictorChoice(
        SHIPPED_DIR, f"shipped predictor ({shipped_backbone()}; {problem}: `forethought train-predictor` trains another)"
    )


def shipped_backbone() -> str:
    """What the shipped head reads: the packaged MiniLM frozen, or fine-tuned (stored as an int8 delta)."""
    backbone = json.loads((SHIPPED_DIR / "config.json").read_text()).get("backbone")
    return "MiniLM fine-tuned on CASTILLO, int8" if backbone == BackboneSource.DELTA.value else "frozen MiniLM"
