"""The predictor shipped in the package, and which predictor to load (SSJF section 3.1).

The package carries a two-layer head trained on the packaged MiniLM-L6 left frozen: the paper's phase 2
alone (``python -m forethought.predict.train --shipped`` rewrites it), so SSJF orders requests on a fresh
install. A predictor fine-tuned in both phases (``forethought train-predictor``) ranks better, so once
one of the current artifact format is in the cache, it is the one loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from forethought.cache import PREDICTOR_DIR
from forethought.predict.artifact import artifact_problem

SHIPPED_DIR = Path(__file__).resolve().parent / "shipped_head"
"""The shipped artifact: config.json, calibration.json, head.safetensors (no backbone copy)."""


@dataclass(frozen=True)
class PredictorChoice:
    """The artifact folder to load, and one line saying which predictor it is (for logs)."""

    directory: Path
    description: str


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
        SHIPPED_DIR, f"shipped predictor (frozen MiniLM; {problem}: `forethought train-predictor` fine-tunes a better one)"
    )
