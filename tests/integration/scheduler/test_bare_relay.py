"""The placement bench's floor: the bare relay streams a worker's real replies through the scheduler's API."""

from __future__ import annotations

import subprocess
import sys

import grpc
from forethought.cluster.ports import free_port
from forethought.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc

MODEL = "SmolLM2-135M-Instruct"


def test_the_bare_relay_takes_turns_over_its_workers_and_streams_their_tokens(start_service, wait_serving) -> None:
    workers = [start_service("worker", "--engine", "null", "--worker-id", f"null-{i}", "--model", MODEL).address
               for i in range(2)]
    port = free_port()
    relay = subprocess.Popen([sys.executable, "-m", "benchmarks.bare_relay", "--port", str(port),
                              *(flag for address in workers for flag in ("--worker", address))])
    try:
        address = f"127.0.0.1:{port}"
        assert wait_serving(address, 60, relay)
        with grpc.insecure_channel(address) as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            listed = stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5)
            assert [worker.address for worker in listed.workers] == workers
            served = []
            for number in range(4):
                request = scheduler_pb2.GenerateRequest(
                    request_id=f"r{number}", model=MODEL, token_ids=common_pb2.TokenIds(ids=list(range(40))),
                    max_tokens=3, sampling=common_pb2.SamplingParams(ignore_eos=True))
                replies = list(stub.Generate(request, timeout=10))
                assert sum(len(reply.token_ids) for reply in replies) == 3
                assert replies[-1].finish_reason == common_pb2.FINISH_REASON_LENGTH
                assert {reply.request_id for reply in replies} == {f"r{number}"}
                served.append(replies[0].worker_id)
        assert served == [workers[0], workers[1], workers[0], workers[1]]
    finally:
        relay.kill()
        relay.wait()
