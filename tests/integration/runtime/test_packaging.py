"""The contract's generated code is fresh, and a wheel installs and runs outside the source tree."""

from __future__ import annotations

import filecmp
import subprocess
import sys
import venv
from pathlib import Path

from forethought.cluster.redis_server import free_port


def test_generated_code_matches_the_protos(tmp_path: Path, repo: Path):
    subprocess.run([sys.executable, str(repo / "scripts" / "generate_protos.py"), "--out", str(tmp_path)], check=True)
    fresh = tmp_path / "forethought" / "v1"
    committed = repo / "libs" / "forethought" / "v1"
    names = sorted(path.name for path in fresh.glob("*_pb2*.py*"))
    assert names == sorted(path.name for path in committed.glob("*_pb2*.py*"))
    stale = [name for name in names if not filecmp.cmp(fresh / name, committed / name, shallow=False)]
    assert stale == [], f"regenerate with `python scripts/generate_protos.py`: {stale}"


def test_wheel_installs_in_a_fresh_venv_and_serves(tmp_path: Path, repo: Path, wait_serving):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(repo)], check=True)
    wheel = next(dist.glob("forethought-*.whl"))
    env_dir = tmp_path / "venv"
    # System site-packages provide the dependencies offline; forethought itself comes from the wheel.
    venv.create(env_dir, with_pip=True, system_site_packages=True)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)], check=True)
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    assert (site / "forethought" / "services" / "worker" / "__init__.py").is_file()
    assert not (site / "services").exists() and not (site / "libs").exists()
    located = subprocess.check_output([str(python), "-c", "import forethought; print(forethought.__file__)"], cwd=tmp_path, text=True)
    assert located.startswith(str(site))
    port = free_port()
    service = subprocess.Popen([str(env_dir / "bin" / "forethought"), "serve", "demand", "--port", str(port)], cwd=tmp_path)
    try:
        assert wait_serving(f"127.0.0.1:{port}", 60, service)
    finally:
        service.terminate()
        assert service.wait(30) == 0
