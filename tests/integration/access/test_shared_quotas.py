"""Quotas shared by scheduler replicas through Redis (--shared-quotas): a tenant's rate holds across replicas.

Two schedulers on one Redis namespace and one sim worker: a tenant with a burst of two requests spends it
on the two replicas and is refused its third on either, with the shared bucket's retry delay; another
tenant is served meanwhile.
"""

from __future__ import annotations

import time

import grpc
import pytest
import yaml
from forethought.access import token_hash
from forethought.rpc.errors import retry_delay_of
from forethought.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.access.conftest import Launcher

MODEL = "SmolLM2-135M-Instruct"
TENANTS = {"tenants": [
    {"name": "metered", "token_sha256": token_hash("token-metered"), "requests_per_s": 0.05, "burst": 2},
    {"name": "free", "token_sha256": token_hash("token-free")},
]}


def generate(address: str, tenant: str) -> int:
    request = scheduler_pb2.GenerateRequest(model=MODEL, max_tokens=2, token_ids=common_pb2.TokenIds(ids=list(range(1, 30))),
                                            sampling=common_pb2.SamplingParams(ignore_eos=True))
    with grpc.insecure_channel(address) as channel:
        replies = scheduler_pb2_grpc.SchedulerServiceStub(channel).Generate(
            request, timeout=30, metadata=(("authorization", f"Bearer token-{tenant}"),))
        return sum(len(reply.token_ids) for reply in replies)


def adopted(address: str) -> None:
    with grpc.insecure_channel(address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        deadline = time.monotonic() + 20
        while not stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5,
                                   metadata=(("authorization", "Bearer token-free"),)).workers:
            assert time.monotonic() < deadline, f"no worker registered at {address}"
            time.sleep(0.1)
    time.sleep(0.3)  # the scheduler's next registry read adopts it


def test_a_tenants_rate_holds_across_replicas(launcher: Launcher, tmp_path) -> None:
    tenants_file = tmp_path / "tenants.yaml"
    tenants_file.write_text(yaml.safe_dump(TENANTS))
    launcher.start("worker", "--engine", "sim", "--worker-id", "shared-w0", "--heartbeat-s", "0.5")
    replicas = [launcher.start("scheduler", "--registry-poll-s", "0.1", "--tenants-file", str(tenants_file),
                               "--shared-quotas").address for _ in range(2)]
    for address in replicas:
        adopted(address)

    assert generate(replicas[0], "metered") == 2
    assert generate(replicas[1], "metered") == 2  # the burst of two, spent on two replicas
    for address in replicas:
        with pytest.raises(grpc.RpcError) as refused:
            generate(address, "metered")
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "tenant 'metered' is over its requests_per_s (0.05) quota" in refused.value.details()
        delay = retry_delay_of(refused.value)
        assert delay is not None and 0 < delay <= 20.0
        assert generate(address, "free") == 2
