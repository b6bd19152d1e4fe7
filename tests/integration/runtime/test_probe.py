"""The container health probe, ``python -m forethought.rpc.probe``, against a live service and an empty port,
and against a service requiring the mesh certificate, with its TLS taken from the service's own environment."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import grpc
import pytest
from forethought.cluster.ports import free_port
from forethought.cluster.redis_server import RedisProcess

from tests.conftest import REPO, ServiceProcess
from tests.integration.access.conftest import serving

TLS_VARIABLES = ("FORETHOUGHT_TLS_CA", "FORETHOUGHT_TLS_CERT", "FORETHOUGHT_TLS_KEY", "FORETHOUGHT_TLS_CLIENT_CA")


def probe(address: str, *flags: str, environ: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Runs the probe with this process's environment less any TLS variable, plus ``environ``."""
    plain = {key: value for key, value in os.environ.items() if key not in TLS_VARIABLES}
    return subprocess.run([sys.executable, "-m", "forethought.rpc.probe", address, "--timeout-s", "1", *flags],
                          capture_output=True, text=True, timeout=60, env={**plain, **(environ or {})})


def test_a_serving_service_passes_and_a_silent_port_fails(start_service) -> None:
    planner = start_service("planner")
    serving = probe(planner.address)
    assert (serving.returncode, serving.stdout) == (0, f"{planner.address} SERVING\n")
    silent = f"127.0.0.1:{free_port()}"
    unreachable = probe(silent)
    assert (unreachable.returncode, unreachable.stdout) == (1, f"{silent} UNREACHABLE\n")


@pytest.fixture
def mesh_environment(tmp_path: Path) -> dict[str, str]:
    """A container's TLS environment with the certificates of scripts/make-certs: serve with the mesh
    certificate, call others trusting the CA, require callers to show the mesh certificate."""
    subprocess.run([str(REPO / "scripts" / "make-certs"), str(tmp_path / "certs")], check=True, capture_output=True)
    certs = tmp_path / "certs"
    return {"FORETHOUGHT_TLS_CERT": str(certs / "mesh.pem"), "FORETHOUGHT_TLS_KEY": str(certs / "mesh-key.pem"),
            "FORETHOUGHT_TLS_CA": str(certs / "ca.pem"), "FORETHOUGHT_TLS_CLIENT_CA": str(certs / "ca.pem")}


@pytest.fixture
def mutual_tls_planner(tmp_path: Path, redis_server: RedisProcess, namespace: str,
                       mesh_environment: dict[str, str]) -> Iterator[ServiceProcess]:
    """A planner started with ``mesh_environment`` alone (no TLS flag), serving once it answers the mesh."""
    address, log_path = f"127.0.0.1:{free_port()}", tmp_path / "planner.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "forethought.cli", "serve", "planner", "--port", address.rpartition(":")[2],
             "--redis-url", redis_server.url, "--namespace", namespace],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **mesh_environment})
    planner = ServiceProcess("planner", address, process, log_path)
    read = {name: Path(mesh_environment[f"FORETHOUGHT_TLS_{name}"]).read_bytes() for name in ("CA", "KEY", "CERT")}
    try:
        assert serving(address, process, grpc.ssl_channel_credentials(read["CA"], read["KEY"], read["CERT"])), planner.log()
        yield planner
    finally:
        planner.terminate()


def test_the_probe_takes_its_tls_from_the_environment_the_service_runs_with(
        mutual_tls_planner: ServiceProcess, mesh_environment: dict[str, str]) -> None:
    address = mutual_tls_planner.address
    shown = probe(address, environ=mesh_environment)
    assert (shown.returncode, shown.stdout) == (0, f"{address} SERVING\n")
    refused = (1, f"{address} UNREACHABLE\n")  # the handshake fails, so the channel never connects
    plaintext = probe(address)
    assert (plaintext.returncode, plaintext.stdout) == refused
    no_certificate = probe(address, environ={"FORETHOUGHT_TLS_CA": mesh_environment["FORETHOUGHT_TLS_CA"]})
    assert (no_certificate.returncode, no_certificate.stdout) == refused
    flag_over_environment = probe(address, "--tls-ca", "", environ=mesh_environment)  # an empty flag: plaintext
    assert (flag_over_environment.returncode, flag_over_environment.stdout) == refused
