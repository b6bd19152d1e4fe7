"""The container health probe, ``python -m forethought.rpc.probe``, against a live service and an empty port."""

from __future__ import annotations

import subprocess
import sys

from forethought.cluster.redis_server import free_port


def probe(address: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "forethought.rpc.probe", address, "--timeout-s", "1"],
                          capture_output=True, text=True, timeout=60)


def test_a_serving_service_passes_and_a_silent_port_fails(start_service) -> None:
    planner = start_service("planner")
    serving = probe(planner.address)
    assert (serving.returncode, serving.stdout) == (0, f"{planner.address} SERVING\n")
    silent = f"127.0.0.1:{free_port()}"
    unreachable = probe(silent)
    assert (unreachable.returncode, unreachable.stdout) == (1, f"{silent} UNREACHABLE\n")
