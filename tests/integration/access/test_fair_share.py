"""Fair share over real processes: with --fair-share, a light tenant's request overtakes a heavy tenant's backlog.

One sim worker that runs one request at a time, so requests finish in the order the scheduler's queue
releases them. The heavy tenant queues six requests, then the light tenant one: in arrival order (FCFS) it
would finish last; shared by virtual token counters it goes as soon as the heavy tenant has had its share.
"""

from __future__ import annotations

import threading
import time

import grpc
import yaml
from forethought.access import token_hash
from forethought.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.access.conftest import Launcher

MODEL = "SmolLM2-135M-Instruct"
TENANTS = {"tenants": [{"name": "heavy", "token_sha256": token_hash("token-heavy")},
                       {"name": "light", "token_sha256": token_hash("token-light")}]}


def test_a_light_tenant_overtakes_a_heavy_tenants_backlog(launcher: Launcher, tmp_path) -> None:
    tenants_file = tmp_path / "tenants.yaml"
    tenants_file.write_text(yaml.safe_dump(TENANTS))
    launcher.start("worker", "--engine", "sim", "--sim-speedup", "0.6", "--capacity", "1", "--worker-id", "fair-w0",
                   "--heartbeat-s", "0.5")
    scheduler = launcher.start("scheduler", "--registry-poll-s", "0.1", "--tenants-file", str(tenants_file),
                               "--fair-share", "--policy", "fcfs", "--max-waiting-per-worker", "1")
    finished: list[str] = []
    lock = threading.Lock()

    with grpc.insecure_channel(scheduler.address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        deadline = time.monotonic() + 20
        while not stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5,
                                   metadata=(("authorization", "Bearer token-light"),)).workers:
            assert time.monotonic() < deadline, "the worker never registered"
            time.sleep(0.1)
        time.sleep(0.3)  # the scheduler's next registry read adopts it

        def send(request_id: str, tenant: str) -> None:
            request = scheduler_pb2.GenerateRequest(request_id=request_id, model=MODEL, max_tokens=10,
                                                    token_ids=common_pb2.TokenIds(ids=list(range(1, 33))),
                                                    sampling=common_pb2.SamplingParams(ignore_eos=True))
            for _ in stub.Generate(request, timeout=120, metadata=(("authorization", f"Bearer token-{tenant}"),)):
                pass
            with lock:
                finished.append(request_id)

        threads = []
        for request_id, tenant in [*((f"heavy-{index}", "heavy") for index in range(6)), ("light-0", "light")]:
            threads.append(threading.Thread(target=send, args=(request_id, tenant)))
            threads[-1].start()
            time.sleep(0.1)  # arrival order: the whole heavy backlog, then the light request
        for thread in threads:
            thread.join(120)

    assert sorted(finished) == sorted(f"heavy-{index}" for index in range(6)) + ["light-0"]
    heavy_after_light = len(finished) - 1 - finished.index("light-0")
    assert heavy_after_light >= 2, f"finish order {finished}: the light request waited behind the heavy backlog"
