"""`forethought up` in a clean environment: comes up, serves `generate`, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from forethought.cluster.redis_server import free_port


def free_port_block(size: int) -> int:
    """A base port whose next ``size`` ports were free a moment ago."""
    for _ in range(50):
        base = free_port()
        if base + size < 65535 and all(_is_free(base + offset) for offset in range(size)):
            return base
    raise RuntimeError("no free port block")


def _is_free(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def start_up(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """Runs ``forethought up ARGS`` and returns once it printed its ready line."""
    up = subprocess.Popen([sys.executable, "-m", "forethought.cli", "up", *args],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output: list[str] = []
    for line in up.stdout:
        output.append(line)
        if line.startswith("ready in"):
            time.sleep(1.0)  # the scheduler's next registry read adopts the workers
            return up
    up.wait()
    raise AssertionError("forethought up exited before it was ready:\n" + "".join(output))


def generate(text: str, base: int, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forethought.cli", "generate", text, "--max-tokens", "8", "--scheduler", f"127.0.0.1:{base}"],
        capture_output=True, text=True, timeout=120, env=env,
    )


def stop(up: subprocess.Popen[str]) -> str:
    """Ctrl-C, as a person would; returns what up printed while stopping."""
    up.send_signal(signal.SIGINT)
    rest, _ = up.communicate(timeout=120)
    return rest


def test_up_generate_status_and_ctrl_c_leaves_no_process(tmp_path: Path):
    base = free_port_block(20)
    env = {**os.environ, "FORETHOUGHT_STATE_DIR": str(tmp_path)}
    up = start_up(["--workers", "2", "--base-port", str(base), "--sim-speedup", "5"], env)
    try:
        children = psutil.Process(up.pid).children(recursive=True)
        assert len(children) >= 7  # redis, tokenizer, demand, planner, 2 workers, scheduler (+ predictor if trained)
        generated = generate("Tell me about the Moon", base, env)
        assert generated.returncode == 0, generated.stderr
        assert "[8 tokens;" in generated.stdout
        status = subprocess.run([sys.executable, "-m", "forethought.cli", "status"], capture_output=True, text=True, timeout=60, env=env)
        assert status.returncode == 0, status.stdout + status.stderr
        assert status.stdout.count("SERVING") >= 6
        assert "worker-1" in status.stdout
    finally:
        rest = stop(up)
    assert up.returncode == 0, rest
    time.sleep(0.5)
    alive = [child for child in children if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]
    assert alive == [], f"left running: {[child.cmdline() for child in alive]}"
    assert not (tmp_path / "up.json").exists()


@pytest.mark.slow
def test_up_with_the_vllm_engine_serves_real_text_through_the_mesh(tmp_path: Path):
    base = free_port_block(20)
    env = {**os.environ, "FORETHOUGHT_STATE_DIR": str(tmp_path)}
    up = start_up(["--workers", "1", "--engine", "vllm", "--base-port", str(base)], env)
    try:
        generated = generate("The capital of France is", base, env)
        assert generated.returncode == 0, generated.stderr
        assert "Paris" in generated.stdout
    finally:
        rest = stop(up)
    assert up.returncode == 0, rest
