"""Mutual TLS with the certificates of scripts/make-certs: a worker that requires the mesh certificate.

The worker runs with ``--tls-client-ca``: the scheduler, which shows its mesh certificate (``--tls-cert``
with ``--tls-ca``), reaches it and serves a client end to end; a caller that trusts the CA but shows no
certificate is refused at the handshake.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from forethought.client import AsyncForethoughtClient
from forethought.v1 import worker_pb2, worker_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.conftest import REPO
from tests.integration.access.conftest import Launcher

MODEL = "SmolLM2-135M-Instruct"


@pytest.fixture(scope="module")
def mesh_certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mesh-certs")
    subprocess.run([str(REPO / "scripts" / "make-certs"), str(folder)], check=True, capture_output=True)
    return folder


def test_only_a_caller_with_the_mesh_certificate_reaches_the_worker(launcher: Launcher, mesh_certs: Path) -> None:
    ca, cert, key = (mesh_certs / "ca.pem").read_bytes(), (mesh_certs / "mesh.pem").read_bytes(), (mesh_certs / "mesh-key.pem").read_bytes()
    mesh_credential = grpc.ssl_channel_credentials(ca, key, cert)
    own = ("--tls-cert", str(mesh_certs / "mesh.pem"), "--tls-key", str(mesh_certs / "mesh-key.pem"))
    worker = launcher.start("worker", "--engine", "sim", "--worker-id", "mtls-w0", "--heartbeat-s", "0.5", *own,
                            "--tls-client-ca", str(mesh_certs / "ca.pem"), credentials=mesh_credential)
    scheduler = launcher.start("scheduler", "--registry-poll-s", "0.1", *own, "--tls-ca", str(mesh_certs / "ca.pem"),
                               credentials=grpc.ssl_channel_credentials(ca))

    with grpc.secure_channel(worker.address, grpc.ssl_channel_credentials(ca)) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            worker_pb2_grpc.WorkerServiceStub(channel).Abort(worker_pb2.AbortRequest(request_id="x"), timeout=5)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    with grpc.secure_channel(worker.address, mesh_credential) as channel:
        status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status
    assert status == health_pb2.HealthCheckResponse.SERVING
    probe = [sys.executable, "-m", "forethought.rpc.probe", worker.address, "--tls-ca", str(mesh_certs / "ca.pem")]
    assert subprocess.run(probe, capture_output=True, timeout=30).returncode == 1  # no certificate shown
    shown = subprocess.run([*probe, "--tls-cert", str(mesh_certs / "mesh.pem"), "--tls-key", str(mesh_certs / "mesh-key.pem")],
                           capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0 and "SERVING" in shown.stdout

    async def complete() -> int:
        async with AsyncForethoughtClient(scheduler.address, root_certs=ca, timeout_s=30) as client:
            deadline = time.monotonic() + 20
            while not await client.list_workers():
                assert time.monotonic() < deadline, "the worker never registered"
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.3)  # the scheduler's next registry read adopts it
            return len((await client.complete(model=MODEL, max_tokens=4, token_ids=list(range(1, 30)))).token_ids)

    assert asyncio.run(complete()) == 4
