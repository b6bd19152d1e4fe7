"""`forethought calibrate` against the real vLLM CPU engine (SmolLM2) with a tiny grid: the saved profile
loads, predicts, and changes the planner's estimates for the models of its shape."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from forethought.engine.executor import BatchShape
from forethought.planner.calibration import load_profile

pytestmark = pytest.mark.slow


def plan_estimate(repo: Path, *profile: str) -> str:
    done = subprocess.run([sys.executable, "-m", "forethought.cli", "plan", "examples/jobs/chain_summary_small.yaml",
                           "--local", "--no-baselines", *profile], cwd=repo, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return next(line for line in done.stdout.splitlines() if line.startswith("estimated inference time"))


def test_a_tiny_calibration_saves_a_profile_that_loads_predicts_and_plans(repo: Path, tmp_path: Path) -> None:
    path = tmp_path / "smol.json"
    done = subprocess.run([sys.executable, "-m", "forethought.cli", "calibrate", "--tiny", "--name", "smol-tiny",
                           "--out", str(path)], cwd=repo, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "profiling" in done.stderr  # the progress bar
    assert "mean error on held-out batches:" in done.stdout
    profile = load_profile(str(path))
    assert profile.name == "smol-tiny" and profile.model.spec.name == "SmolLM2-135M"
    assert profile.load_s > 0 and profile.rows > 0 and profile.clock == "engine-cpu"
    [heldout] = profile.heldout
    assert heldout.measured_s > 0 and heldout.predicted_s > 0 and heldout.wall_s > 0
    executor = profile.executor()
    assert executor.iteration_time(BatchShape(decode_requests=2, decode_context_tokens=100)) > 0
    assert executor.iteration_time(BatchShape(prefill_tokens=64, prefill_requests=2)) > 0
    assert plan_estimate(repo, "--profile", str(path)) != plan_estimate(repo)
