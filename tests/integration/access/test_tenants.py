"""Tokens, tenants and quotas at the scheduler's front door and the HTTP front, over real processes.

One scheduler with a tenants file and one sim worker: calls without a known token are UNAUTHENTICATED; a
tenant over its requests/s or open streams gets RESOURCE_EXHAUSTED with RetryInfo while another is served;
a tenant cannot cancel another's request; the HTTP front passes the bearer header on (200, else 401).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import yaml
from forethought.access import token_hash
from forethought.rpc.errors import retry_delay_of
from forethought.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.integration.access.conftest import Launcher
from tests.integration.live_mesh import wait_until

MODEL = "SmolLM2-135M-Instruct"
TOKENS = {"alpha": "token-alpha", "beta": "token-beta", "gamma": "token-gamma", "delta": "token-delta"}
TENANTS = {"tenants": [
    {"name": "alpha", "token_sha256": token_hash(TOKENS["alpha"]), "requests_per_s": 0.1, "burst": 2},
    {"name": "beta", "token_sha256": [token_hash(TOKENS["beta"])], "max_streams": 1},
    {"name": "gamma", "token_sha256": token_hash(TOKENS["gamma"])},
    {"name": "delta", "token_sha256": token_hash(TOKENS["delta"])},
]}


@dataclass(frozen=True)
class Mesh:
    scheduler: str
    http: str


@pytest.fixture(scope="module")
def mesh(launcher: Launcher, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    tenants_file = tmp_path_factory.mktemp("tenants") / "tenants.yaml"
    tenants_file.write_text(yaml.safe_dump(TENANTS))
    launcher.start("worker", "--engine", "sim", "--sim-speedup", "0.5", "--worker-id", "w0", "--heartbeat-s", "0.5")
    scheduler = launcher.start("scheduler", "--registry-poll-s", "0.1", "--tenants-file", str(tenants_file))
    http = launcher.start("http", "--scheduler-address", scheduler.address, health=False)
    wait_for_http(http.address)
    with grpc.insecure_channel(scheduler.address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        wait_until(lambda: len(stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5,
                                                metadata=bearer("gamma")).workers) == 1, "the worker registered")
    time.sleep(0.3)  # the scheduler's next registry read adopts it
    yield Mesh(scheduler.address, http.address)


@pytest.fixture
def stub(mesh: Mesh) -> Iterator[scheduler_pb2_grpc.SchedulerServiceStub]:
    with grpc.insecure_channel(mesh.scheduler) as channel:
        yield scheduler_pb2_grpc.SchedulerServiceStub(channel)


def bearer(tenant: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {TOKENS[tenant]}"),)


def request(max_tokens: int, request_id: str = "") -> scheduler_pb2.GenerateRequest:
    return scheduler_pb2.GenerateRequest(request_id=request_id, model=MODEL, max_tokens=max_tokens,
                                         token_ids=common_pb2.TokenIds(ids=list(range(1, 40))),
                                         sampling=common_pb2.SamplingParams(ignore_eos=True))


def generated(stub: scheduler_pb2_grpc.SchedulerServiceStub, tenant: str, max_tokens: int = 2) -> int:
    replies = list(stub.Generate(request(max_tokens), timeout=30, metadata=bearer(tenant)))
    return sum(len(reply.token_ids) for reply in replies)


def generated_as(stub: scheduler_pb2_grpc.SchedulerServiceStub, tenant: str, request_id: str) -> int:
    replies = list(stub.Generate(request(2, request_id), timeout=30, metadata=bearer(tenant)))
    assert {reply.request_id for reply in replies} == {request_id}  # the caller's id, not the scheduler's
    return sum(len(reply.token_ids) for reply in replies)


def refusal(call: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        list(call) if not callable(call) else call()  # type: ignore[call-overload]
    return raised.value


def wait_for_http(address: str) -> None:
    def up() -> bool:
        try:
            return urllib.request.urlopen(f"http://{address}/health", timeout=1).status == 200
        except OSError:
            return False
    wait_until(up, f"the HTTP front at {address}", 60)


@pytest.mark.parametrize("metadata", [(), (("authorization", "Bearer not-a-token"),), (("authorization", TOKENS["gamma"]),)],
                         ids=["no-token", "wrong-token", "not-bearer"])
def test_a_call_without_a_known_token_is_unauthenticated(stub: scheduler_pb2_grpc.SchedulerServiceStub, metadata) -> None:
    for call in (lambda: list(stub.Generate(request(2), timeout=10, metadata=metadata)),
                 lambda: stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=10, metadata=metadata),
                 lambda: stub.Cancel(scheduler_pb2.CancelRequest(request_id="x"), timeout=10, metadata=metadata)):
        error = refusal(call)
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "bearer token" in error.details()


def test_health_needs_no_token(mesh: Mesh) -> None:
    with grpc.insecure_channel(mesh.scheduler) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_a_tenant_over_its_rate_is_told_when_to_retry_while_another_is_served(
        stub: scheduler_pb2_grpc.SchedulerServiceStub) -> None:
    assert generated(stub, "alpha") == 2
    assert generated(stub, "alpha") == 2  # the burst of 2
    error = refusal(lambda: generated(stub, "alpha"))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "tenant 'alpha' is over its requests_per_s (0.1) quota" in error.details()
    delay = retry_delay_of(error)
    assert delay is not None and 0 < delay <= 10.0
    assert generated(stub, "gamma") == 2


def test_a_tenant_at_its_stream_limit_waits_for_one_to_end(stub: scheduler_pb2_grpc.SchedulerServiceStub) -> None:
    long = stub.Generate(request(4000, "beta-long"), timeout=60, metadata=bearer("beta"))
    assert next(long).request_id == "beta-long"  # the stream is open
    error = refusal(lambda: generated(stub, "beta"))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "max_streams (1 open)" in error.details() and retry_delay_of(error) == 1.0
    assert generated(stub, "delta") == 2
    assert stub.Cancel(scheduler_pb2.CancelRequest(request_id="beta-long"), timeout=10, metadata=bearer("beta")).cancelled
    long.cancel()
    wait_until(lambda: _admitted(stub, "beta"), "beta's stream slot freed")


def _admitted(stub: scheduler_pb2_grpc.SchedulerServiceStub, tenant: str) -> bool:
    try:
        return generated(stub, tenant) == 2
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
            raise
        return False


def test_a_tenant_cannot_cancel_another_tenants_request(stub: scheduler_pb2_grpc.SchedulerServiceStub) -> None:
    stream = stub.Generate(request(4000, "gamma-long"), timeout=60, metadata=bearer("gamma"))
    first = next(stream)
    assert first.request_id == "gamma-long"
    cancel = scheduler_pb2.CancelRequest(request_id="gamma-long")
    unknown = stub.Cancel(scheduler_pb2.CancelRequest(request_id="nobody-has-this"), timeout=10, metadata=bearer("delta"))
    assert stub.Cancel(cancel, timeout=10, metadata=bearer("delta")) == unknown  # as for an unknown id
    assert not unknown.cancelled
    assert len(next(stream).token_ids) > 0  # still streaming
    assert generated_as(stub, "delta", "gamma-long") == 2  # the same id in another tenant's namespace
    assert stub.Cancel(cancel, timeout=10, metadata=bearer("gamma")).cancelled
    finishes = [reply.finish_reason for reply in stream if reply.finish_reason]
    assert finishes == [common_pb2.FINISH_REASON_ABORT]


def _post(address: str, token: str | None) -> tuple[int, dict]:
    body = json.dumps({"model": MODEL, "prompt": list(range(1, 20)), "max_tokens": 3, "ignore_eos": True}).encode()
    headers = {"content-type": "application/json", **({"authorization": f"Bearer {token}"} if token else {})}
    post = urllib.request.Request(f"http://{address}/v1/completions", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(post, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_http_front_passes_the_bearer_token_on(mesh: Mesh) -> None:
    status, body = _post(mesh.http, TOKENS["gamma"])
    assert status == 200, body
    assert body["usage"]["completion_tokens"] == 3
    for token in (None, "not-a-token"):
        status, body = _post(mesh.http, token)
        assert status == 401
        assert body["error"]["type"] == "authentication_error" and body["error"]["code"] == "unauthenticated"


def test_the_generate_command_sends_its_token(mesh: Mesh) -> None:
    def generate(*token: str) -> str:
        return subprocess.run([sys.executable, "-m", "forethought.cli", "generate", "--raw", "Hi", "--scheduler",
                               mesh.scheduler, *token], capture_output=True, text=True, timeout=60).stderr

    assert "UNAUTHENTICATED" in generate()
    authenticated = generate("--token", TOKENS["gamma"])  # past the door: text prompts need the absent tokenizer
    assert "UNAUTHENTICATED" not in authenticated and "tokenizer" in authenticated


def test_the_tenants_file_is_checked_at_start(launcher: Launcher, tmp_path: Path) -> None:
    broken = tmp_path / "tenants.yaml"
    broken.write_text(yaml.safe_dump({"tenants": [{"name": "x", "token_sha256": "short"}]}))
    service = launcher.start("scheduler", "--tenants-file", str(broken), health=False)
    assert service.process.wait(60) == 2
    assert "--tenants-file" in service.log() and "tenants[0].token_sha256" in service.log()
