"""Client -> scheduler -> worker over real gRPC: streaming, cancel, deadlines, and one trace across hops."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest
from forethought.rpc.channels import open_channel
from forethought.rpc.server import running_service
from forethought.v1 import (
    common_pb2,
    scheduler_pb2,
    scheduler_pb2_grpc,
    worker_pb2,
    worker_pb2_grpc,
)
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

MODEL = "SmolLM2-135M-Instruct"


def token_request(request_id: str, max_tokens: int) -> scheduler_pb2.GenerateRequest:
    return scheduler_pb2.GenerateRequest(
        request_id=request_id, model=MODEL, token_ids=common_pb2.TokenIds(ids=list(range(100, 164))),
        max_tokens=max_tokens, sampling=common_pb2.SamplingParams(ignore_eos=True),
    )


def wait_for_workers(stub: scheduler_pb2_grpc.SchedulerServiceStub, count: int) -> list[scheduler_pb2.WorkerInfo]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        workers = stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5).workers
        if len(workers) >= count:
            return list(workers)
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} workers registered")


@pytest.fixture
def scheduler(start_service) -> Iterator[scheduler_pb2_grpc.SchedulerServiceStub]:
    """A scheduler's stub once it has adopted its two sim workers, w0 and w1."""
    for index in range(2):
        start_service("worker", "--engine", "sim", "--sim-speedup", "5", "--worker-id", f"w{index}")
    address = start_service("scheduler", "--registry-poll-s", "0.1").address
    with grpc.insecure_channel(address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        assert {worker.worker_id for worker in wait_for_workers(stub, 2)} == {"w0", "w1"}
        time.sleep(0.3)  # the scheduler's next registry read adopts both workers
        yield stub


def worker_load(address: str) -> int:
    """Requests running or waiting on the worker, from its Stats stream."""
    with grpc.insecure_channel(address) as channel:
        load = next(worker_pb2_grpc.WorkerServiceStub(channel).Stats(worker_pb2.StatsRequest(interval_s=0.1), timeout=5)).load
    return load.best_effort.running + load.best_effort.waiting


def wait_until_idle(address: str, timeout_s: float = 10.0) -> int:
    """Polls the worker's load until it is 0 or the time is up; returns the last load."""
    deadline = time.monotonic() + timeout_s
    while (load := worker_load(address)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return load


def test_tokens_stream_from_a_worker_through_the_scheduler(scheduler):
    replies = list(scheduler.Generate(token_request("r1", 12), timeout=30))
    assert replies[0].worker_id in {"w0", "w1"}
    assert sum(len(reply.token_ids) for reply in replies) == 12
    assert replies[-1].finish_reason == common_pb2.FINISH_REASON_LENGTH
    assert replies[-1].usage.prompt_tokens == 64
    assert replies[-1].usage.output_tokens == 12


def test_cancel_aborts_the_request_on_its_worker(scheduler):
    stream = scheduler.Generate(token_request("long-1", 2000), timeout=60)
    first = next(stream)
    assert scheduler.Cancel(scheduler_pb2.CancelRequest(request_id="long-1"), timeout=5).cancelled
    rest = list(stream)
    assert rest[-1].finish_reason == common_pb2.FINISH_REASON_ABORT
    assert len(first.token_ids) + sum(len(reply.token_ids) for reply in rest) < 2000
    assert not scheduler.Cancel(scheduler_pb2.CancelRequest(request_id="long-1"), timeout=5).cancelled


def test_a_client_that_cancels_its_call_frees_the_worker(scheduler):
    stream = scheduler.Generate(token_request("walks-away", 5000), timeout=60)
    first = next(stream)
    workers = scheduler.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5).workers
    home = next(worker.address for worker in workers if worker.worker_id == first.worker_id)
    assert worker_load(home) == 1
    stream.cancel()
    assert wait_until_idle(home) == 0


def test_an_expired_client_deadline_frees_the_worker(start_service):
    worker = start_service("worker", "--engine", "sim", "--sim-speedup", "1")
    with grpc.insecure_channel(worker.address) as channel:
        stub = worker_pb2_grpc.WorkerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            list(stub.Generate(worker_pb2.WorkerServiceGenerateRequest(
                request_id="slow", prompt_token_ids=[1, 2, 3], max_tokens=5000,
                sampling=common_pb2.SamplingParams(ignore_eos=True)), timeout=0.5))
        assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert wait_until_idle(worker.address) == 0


async def test_one_trace_spans_client_scheduler_tokenizer_and_worker(redis_server, namespace):
    from forethought.services.scheduler.shell import SERVICE as scheduler_service
    from forethought.services.scheduler.shell import Settings as SchedulerSettings
    from forethought.services.tokenizer.shell import SERVICE as tokenizer_service
    from forethought.services.tokenizer.shell import Settings as TokenizerSettings
    from forethought.services.worker.shell import SERVICE as worker_service
    from forethought.services.worker.shell import Settings as WorkerSettings

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    trace.set_tracer_provider(provider)
    common = {"redis_url": redis_server.url, "namespace": namespace}
    told = scheduler_pb2.GenerateRequest(request_id="traced-1", model=MODEL, text="Trace me.", max_tokens=3,
                                         return_text=True, sampling=common_pb2.SamplingParams(ignore_eos=True))
    async with (running_service(worker_service, WorkerSettings(port=0, worker_id="traced", sim_speedup=20, **common)),
                running_service(tokenizer_service, TokenizerSettings(port=0)) as tokenizer):
        async with running_service(scheduler_service, SchedulerSettings(port=0, registry_poll_s=0.1, tokenizer_address=tokenizer,
                                                                  **common)) as address:
            async with open_channel(address) as channel:
                stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
                with tracer.start_as_current_span("client-call") as root:
                    replies = [reply async for reply in stub.Generate(told, timeout=30)]
    assert replies[-1].finish_reason == common_pb2.FINISH_REASON_LENGTH
    trace_id = root.get_span_context().trace_id
    names = {span.name for span in exporter.get_finished_spans() if span.context.trace_id == trace_id}
    assert {"/forethought.v1.SchedulerService/Generate", "/forethought.v1.WorkerService/Generate",
            "/forethought.v1.TokenizerService/Tokenize", "/forethought.v1.TokenizerService/DetokenizeStream"} <= names
