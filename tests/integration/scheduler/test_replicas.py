"""Two scheduler replicas over one Redis and the same sim workers, each a real process.

One replica is SIGKILLed under load: clients given both addresses retry UNAVAILABLE on the other, which
serves from the shared registry and index; only streams already cut mid-way fail (UNAVAILABLE saying how
many tokens arrived), nothing is lost. A ``Cancel`` reaches a request whichever replica receives it (the
owner is found through Redis), and with tenants still only the caller's own requests.
"""

from __future__ import annotations

import collections
import signal
import threading
import time

import grpc
import pytest
import yaml
from forethought.access import token_hash
from forethought.client import ClientError, ForethoughtClient, RetryPolicy
from forethought.domain import SamplingParams
from forethought.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.live_mesh import wait_until
from tests.integration.scheduler.test_scheduler import MODEL, adopted, scheduler, token_request, worker

RETRY = RetryPolicy(max_attempts=6, initial_backoff_s=0.1, max_backoff_s=1.0)


def replicas(start_service, workers: int, *args: str):
    """Two schedulers, once each has adopted ``workers`` workers."""
    pair = [scheduler(start_service, *args), scheduler(start_service, *args)]
    for replica in pair:
        with grpc.insecure_channel(replica.address) as channel:
            adopted(scheduler_pb2_grpc.SchedulerServiceStub(channel), workers)
    return pair


def test_a_replica_killed_under_load_loses_nothing(start_service) -> None:
    for index in range(2):
        worker(start_service, f"w{index}", "10")
    first, second = replicas(start_service, 2)
    counts: collections.Counter[str] = collections.Counter()
    cut_after: list[int] = []
    stop = threading.Event()
    lock = threading.Lock()

    def load(client: ForethoughtClient, number: int) -> None:
        sequence = 0
        while not stop.is_set():
            sequence += 1
            with lock:
                counts["sent"] += 1
            try:
                answer = client.complete(model=MODEL, max_tokens=16, token_ids=list(range(100 + number, 164 + number)),
                                         sampling=SamplingParams(ignore_eos=True), request_id=f"c{number}-{sequence}",
                                         timeout_s=30)
            except ClientError as error:
                with lock:
                    counts[f"failed {error.code.name}"] += 1
                    cut_after.append(error.tokens_delivered)
                continue
            with lock:
                counts["completed" if answer.usage.output_tokens == 16 else "short"] += 1

    with ForethoughtClient([first.address, second.address], retry=RETRY) as client:
        threads = [threading.Thread(target=load, args=(client, number)) for number in range(6)]
        for thread in threads:
            thread.start()
        time.sleep(2.0)
        before_kill = counts["completed"]
        first.process.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        time.sleep(4.0)
        stop.set()
        for thread in threads:
            thread.join(60)
        after_kill = counts["completed"] - before_kill
    failed = sum(count for name, count in counts.items() if name.startswith("failed"))
    lost = counts["sent"] - counts["completed"] - failed
    print(f"replica killed {time.monotonic() - killed_at:.1f} s before the end; {dict(counts)}; "
          f"cut streams had delivered {cut_after} tokens; lost {lost}")
    assert lost == 0 and counts["short"] == 0
    assert before_kill > 0 and after_kill > 0  # the survivor served the rest
    # Only streams the dead replica was relaying fail, each saying so; every other call was retried.
    assert set(counts) <= {"sent", "completed", "failed UNAVAILABLE"}
    # A replica killed after the last token but before the stream's status cuts a stream holding all 16.
    assert failed <= 6 and all(0 < delivered <= 16 for delivered in cut_after)


def _streaming(stub: scheduler_pb2_grpc.SchedulerServiceStub, request_id: str,
               metadata: tuple[tuple[str, str], ...] = ()) -> grpc.Call:
    stream = stub.Generate(token_request(request_id, list(range(300, 364)), 4000), timeout=60, metadata=metadata)
    assert len(next(stream).token_ids) > 0  # on a worker, streaming
    return stream


def _finishes(stream: grpc.Call) -> list[int]:
    return [reply.finish_reason for reply in stream if reply.finish_reason]


def test_a_cancel_sent_to_the_other_replica_reaches_the_request(start_service) -> None:
    worker(start_service, "w0", "0.5")
    first, second = replicas(start_service, 1)
    with grpc.insecure_channel(first.address) as one, grpc.insecure_channel(second.address) as two:
        owner, other = scheduler_pb2_grpc.SchedulerServiceStub(one), scheduler_pb2_grpc.SchedulerServiceStub(two)
        stream = _streaming(owner, "long")
        assert not other.Cancel(scheduler_pb2.CancelRequest(request_id="nobody-has-this"), timeout=10).cancelled
        assert other.Cancel(scheduler_pb2.CancelRequest(request_id="long"), timeout=10).cancelled
        assert _finishes(stream) == [common_pb2.FINISH_REASON_ABORT]
        # Finished: its record is gone, so the other replica no longer finds it.
        assert not other.Cancel(scheduler_pb2.CancelRequest(request_id="long"), timeout=10).cancelled


TOKENS = {"gamma": "token-gamma", "delta": "token-delta"}


def _bearer(tenant: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {TOKENS[tenant]}"),)


@pytest.fixture
def tenants_file(tmp_path):
    path = tmp_path / "tenants.yaml"
    path.write_text(yaml.safe_dump({"tenants": [{"name": name, "token_sha256": token_hash(token)}
                                                for name, token in TOKENS.items()]}))
    return path


def test_a_tenant_cannot_cancel_another_tenants_request_through_the_other_replica(start_service, tenants_file) -> None:
    worker(start_service, "w0", "0.5")
    pair = [scheduler(start_service, "--tenants-file", str(tenants_file)) for _ in range(2)]
    with grpc.insecure_channel(pair[0].address) as one, grpc.insecure_channel(pair[1].address) as two:
        owner, other = scheduler_pb2_grpc.SchedulerServiceStub(one), scheduler_pb2_grpc.SchedulerServiceStub(two)
        for stub in (owner, other):
            wait_until(lambda stub=stub: len(stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5,
                                                              metadata=_bearer("gamma")).workers) == 1, "the worker registered")
        time.sleep(0.3)  # the replicas' next registry read adopts it
        stream = _streaming(owner, "shared-id", _bearer("gamma"))
        cancel = scheduler_pb2.CancelRequest(request_id="shared-id")
        assert not other.Cancel(cancel, timeout=10, metadata=_bearer("delta")).cancelled  # another tenant's: unknown
        assert len(next(stream).token_ids) > 0  # still streaming
        assert other.Cancel(cancel, timeout=10, metadata=_bearer("gamma")).cancelled
        assert _finishes(stream) == [common_pb2.FINISH_REASON_ABORT]
