"""TLS end to end with a local CA on loopback: client -> scheduler -> worker, and HTTPS at the HTTP front.

Every service serves TLS (``--tls-cert``/``--tls-key``) and the scheduler and HTTP front call over TLS
(``--tls-ca``); the Python client trusts the CA and sends its tenant's token. A plaintext client is refused.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
import yaml
from forethought.access import new_token, token_hash
from forethought.client import AsyncForethoughtClient, ClientError, RetryPolicy
from forethought.v1 import scheduler_pb2, scheduler_pb2_grpc

from tests.integration.access.conftest import Certificates, Launcher

MODEL = "SmolLM2-135M-Instruct"
TOKEN = new_token()


@dataclass(frozen=True)
class SecureMesh:
    scheduler: str
    http: str
    certificates: Certificates


@pytest.fixture(scope="module")
def mesh(launcher: Launcher, certificates: Certificates,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureMesh]:
    tenants_file = tmp_path_factory.mktemp("tenants") / "tenants.yaml"
    tenants_file.write_text(yaml.safe_dump({"tenants": [{"name": "secure", "token_sha256": token_hash(TOKEN)}]}))
    tls = ("--tls-cert", str(certificates.cert), "--tls-key", str(certificates.key), "--tls-ca", str(certificates.ca))
    trusting = grpc.ssl_channel_credentials(certificates.root_certs)
    launcher.start("worker", "--engine", "sim", "--worker-id", "tls-w0", "--heartbeat-s", "0.5", *tls, credentials=trusting)
    scheduler = launcher.start("scheduler", "--registry-poll-s", "0.1", "--tenants-file", str(tenants_file), *tls,
                               credentials=trusting)
    http = launcher.start("http", "--scheduler-address", scheduler.address, *tls, health=False)
    yield SecureMesh(scheduler.address, http.address, certificates)


async def _complete(mesh: SecureMesh) -> int:
    async with AsyncForethoughtClient(mesh.scheduler, token=TOKEN, root_certs=mesh.certificates.root_certs,
                                      timeout_s=30) as client:
        deadline = time.monotonic() + 20
        while not await client.list_workers():
            assert time.monotonic() < deadline, "the TLS worker never registered"
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)  # the scheduler's next registry read adopts it
        completion = await client.complete(model=MODEL, max_tokens=5, token_ids=list(range(1, 30)))
        return len(completion.token_ids)


def test_a_client_reaches_the_worker_over_tls(mesh: SecureMesh) -> None:
    assert asyncio.run(_complete(mesh)) == 5


def test_a_plaintext_client_is_refused(mesh: SecureMesh) -> None:
    with grpc.insecure_channel(mesh.scheduler) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5,
                             metadata=(("authorization", f"Bearer {TOKEN}"),))
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE


def test_tls_without_the_token_is_still_unauthenticated(mesh: SecureMesh) -> None:
    async def listed() -> None:
        async with AsyncForethoughtClient(mesh.scheduler, root_certs=mesh.certificates.root_certs,
                                          retry=RetryPolicy(max_attempts=1), timeout_s=10) as client:
            await client.list_workers()

    with pytest.raises(ClientError) as raised:
        asyncio.run(listed())
    assert raised.value.code == grpc.StatusCode.UNAUTHENTICATED


def test_the_http_front_serves_https(mesh: SecureMesh) -> None:
    trusting = ssl.create_default_context(cafile=str(mesh.certificates.ca))
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"https://{mesh.http}/health", timeout=1, context=trusting)
            break
        except OSError:
            assert time.monotonic() < deadline, "the HTTPS front never answered"
            time.sleep(0.1)
    body = json.dumps({"model": MODEL, "prompt": list(range(1, 20)), "max_tokens": 3, "ignore_eos": True}).encode()
    post = urllib.request.Request(f"https://{mesh.http}/v1/completions", data=body, method="POST",
                                  headers={"content-type": "application/json", "authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(post, timeout=30, context=trusting) as answer:
        assert answer.status == 200
        assert json.loads(answer.read())["usage"]["completion_tokens"] == 3
