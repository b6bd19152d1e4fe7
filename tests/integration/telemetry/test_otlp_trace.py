"""One request, one trace: the HTTP front, scheduler, tokenizer, predictor, demand service and worker run as
real processes exporting spans over OTLP/gRPC to a receiver in this test, and every span of a request (a
step of an application run, sent to the HTTP front) hangs, parent by parent, under the scheduler's Generate
span, itself under the front's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from forethought.cluster.ports import free_port
from forethought.v1 import demand_pb2, demand_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

MODEL = "SmolLM2-135M-Instruct"
GENERATE = "/forethought.v1.SchedulerService/Generate"
APPLICATION = """
name: answer_and_check
profiling_runs: 20
units:
  answer:
    backend: {kind: llm, model: SmolLM2-135M-Instruct}
    next: {check: 1.0}
    profile: {input_tokens: 16, output_tokens: {uniform: [2, 6]}}
  check:
    backend: {kind: tool, tool: python-sandbox}
    profile: {tool_duration_s: {uniform: [0.1, 0.3]}}
"""


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str


class TraceReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace collector that keeps every span it is sent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[ReceivedSpan] = []

    def Export(self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext,
               ) -> trace_service_pb2.ExportTraceServiceResponse:
        received = []
        for resource_spans in request.resource_spans:
            service = next((attribute.value.string_value for attribute in resource_spans.resource.attributes
                            if attribute.key == "service.name"), "")
            for scope_spans in resource_spans.scope_spans:
                received += [ReceivedSpan(service, span.name, span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex())
                             for span in scope_spans.spans]
        with self._lock:
            self._spans += received
        return trace_service_pb2.ExportTraceServiceResponse()

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)


@pytest.fixture
def receiver() -> Iterator[tuple[TraceReceiver, str]]:
    servicer = TraceReceiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(grace=None)


def trace_of_generate(receiver: TraceReceiver, services: set[str], timeout_s: float = 30.0) -> tuple[ReceivedSpan, list[ReceivedSpan]]:
    """The scheduler's Generate span and the spans of its trace, once every one of ``services`` has sent
    its part and every span's parent has arrived (exporters send in batches, each in its own time, and
    the scheduler's background calls, such as Observe, end after the request)."""
    deadline = time.monotonic() + timeout_s
    while True:
        spans = receiver.spans()
        generates = [span for span in spans if span.name == GENERATE and span.service == "forethought-scheduler"]
        trace = [span for span in spans if generates and span.trace_id == generates[0].trace_id]
        ids = {span.span_id for span in trace}
        whole = all(not span.parent_id or span.parent_id in ids for span in trace)
        if (services <= {span.service for span in trace} and whole) or time.monotonic() > deadline:
            assert len(generates) == 1, f"{len(generates)} Generate spans arrived"
            return generates[0], trace
        time.sleep(0.1)


@pytest.fixture
def start_http(tmp_path: Path) -> Iterator[Callable[[str, dict[str, str]], str]]:
    """Starts ``forethought serve http`` over a scheduler; returns its base URL once /health answers."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(scheduler_address: str, env: dict[str, str]) -> str:
        port = free_port()
        log_path = tmp_path / "http.log"
        with log_path.open("wb") as log:
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "forethought.cli", "serve", "http", "--port", str(port),
                 "--scheduler-address", scheduler_address], stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env}))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=1)
                return url
            except OSError:
                assert processes[-1].poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.1)

    yield start
    for process in processes:
        process.terminate()
        process.wait(30)


def ancestors(span: ReceivedSpan, by_id: dict[str, ReceivedSpan]) -> list[ReceivedSpan]:
    chain = []
    while span.parent_id:
        assert span.parent_id in by_id, f"{span.service} {span.name}: its parent {span.parent_id} never arrived"
        span = by_id[span.parent_id]
        chain.append(span)
    return chain


def test_an_application_step_through_the_http_front_is_one_connected_trace(receiver, start_service, start_http) -> None:
    collector, address = receiver
    # Batches leave every 100 ms instead of 5 s, so the spans arrive while the services still run.
    env = {"FORETHOUGHT_OTEL_EXPORTER": "otlp", "FORETHOUGHT_OTEL_ENDPOINT": address, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    tokenizer = start_service("tokenizer", env=env, timeout_s=120)
    predictor = start_service("predictor", env=env, timeout_s=180)
    demand = start_service("demand", "--seed", "3", "--walks", "100", env=env)
    start_service("worker", "--engine", "sim", "--sim-speedup", "20", "--worker-id", "w-traced", env=env)
    scheduler = start_service("scheduler", "--tokenizer-address", tokenizer.address, "--predictor-address",
                              predictor.address, "--demand-address", demand.address, env=env)
    front = start_http(scheduler.address, env)
    with grpc.insecure_channel(demand.address) as channel:
        demand_pb2_grpc.DemandServiceStub(channel).RegisterApplication(
            demand_pb2.RegisterApplicationRequest(application_file=APPLICATION), timeout=60)
    with grpc.insecure_channel(scheduler.address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        stub.SubmitApplication(scheduler_pb2.SubmitApplicationRequest(application="answer_and_check", run_id="run-traced"),
                               timeout=30)
        deadline = time.monotonic() + 30
        while not stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5).workers:
            assert time.monotonic() < deadline, "the worker never registered"
            time.sleep(0.1)
    body = {"model": MODEL, "prompt": "Tell me about tracing.", "max_tokens": 4,
            "application_id": "run-traced", "step": "answer"}
    request = urllib.request.Request(f"{front}/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    answer = json.loads(urllib.request.urlopen(request, timeout=60).read())  # no traceparent: the front starts the trace
    assert answer["usage"]["completion_tokens"] >= 1

    services = {f"forethought-{name}" for name in ("http", "scheduler", "tokenizer", "predictor", "demand", "worker")}
    generate, trace = trace_of_generate(collector, services)
    assert services == {span.service for span in trace}
    by_id = {span.span_id: span for span in trace}
    root = by_id[generate.parent_id]
    assert (root.service, root.name, root.parent_id) == ("forethought-http", "POST /v1/completions", "")
    for span in trace:
        if span not in (root, generate):
            chain = ancestors(span, by_id)
            assert chain[-2:] == [generate, root], f"{span.service} {span.name} is not under the scheduler's Generate span"
    served = {(span.service, span.name) for span in trace if span.service not in ("forethought-scheduler", "forethought-http")}
    assert {("forethought-tokenizer", "/forethought.v1.TokenizerService/Tokenize"),
            ("forethought-predictor", "/forethought.v1.PredictorService/Predict"),
            ("forethought-demand", "/forethought.v1.DemandService/Estimate"),
            ("forethought-worker", "/forethought.v1.WorkerService/Generate")} <= served
    # Calls before this one (the run's submission, registry reads) made traces of their own.
    assert not {"/forethought.v1.SchedulerService/ListWorkers", "/forethought.v1.SchedulerService/SubmitApplication",
                "/forethought.v1.DemandService/RegisterApplication"} & {span.name for span in trace}
