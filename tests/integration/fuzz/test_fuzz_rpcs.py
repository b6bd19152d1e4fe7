"""Every RPC of the mesh fuzzed with generated messages, against real processes over a real Redis.

Messages are drawn from each method's own descriptor (every field: empty, huge, out of range, NaN,
unknown enum values, nested messages, long repeated fields), plus raw bytes that are not a valid message
(invalid UTF-8 in a string field among them) and generated application graphs (deep, cyclic, dangling).
Each call must end in a status a client can act on, never INTERNAL or UNKNOWN: an INVALID_ARGUMENT names
the field and rule (`field: rule`). Afterwards every service still answers its health check and no
request is left on the workers or in the queue.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field

import grpc
import pytest
from forethought.v1 import (
    demand_pb2,
    planner_pb2,
    predictor_pb2,
    scheduler_pb2,
    scheduler_pb2_grpc,
    tokenizer_pb2,
    worker_pb2,
)
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MODEL = "SmolLM2-135M-Instruct"
EXAMPLES = 60  # generated messages per method (raw bytes: half as many)
ACTIONABLE = {
    grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNIMPLEMENTED,
}
WAITS = {"WatchApplication", "WatchPrewarm", "Stats", "Status"}  # streams that may stay open with nothing to say
FIELD_RULE = re.compile(r"^[\w.\[\]<>-]+: \S")
STRINGS = st.one_of(
    st.text(max_size=40), st.sampled_from(["", MODEL, "end", "../../etc/passwd", "x" * 5000, "\u0000", "🙂" * 50]))


def scalar(field: FieldDescriptor) -> st.SearchStrategy[object]:
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        return STRINGS
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(width=64 if kind == FieldDescriptor.TYPE_DOUBLE else 32)
    if kind == FieldDescriptor.TYPE_ENUM:
        return st.integers(-3, 12)
    if kind in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32):
        return st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, 1, -1, 2**31 - 1, 4096, 65_536]))
    if kind in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return st.integers(0, 2**32 - 1)
    if kind in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return st.integers(0, 2**64 - 1)
    return st.integers(-(2**63), 2**63 - 1)


def messages(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    """Messages of ``descriptor``'s type with any subset of their fields set to anything."""
    message_class = GetMessageClass(descriptor)
    fields: dict[str, st.SearchStrategy[object]] = {}
    for spec in descriptor.fields:
        if spec.type == FieldDescriptor.TYPE_MESSAGE:
            if depth >= 3 or spec.message_type.GetOptions().map_entry:
                continue
            value: st.SearchStrategy[object] = messages(spec.message_type, depth + 1)
        else:
            value = scalar(spec)
        if spec.is_repeated:
            value = st.lists(value, max_size=300 if spec.type != FieldDescriptor.TYPE_MESSAGE else 4)
        fields[spec.name] = value

    def build(values: dict[str, object]) -> Message:
        message = message_class()
        for name, value in values.items():
            spec = descriptor.fields_by_name[name]
            if spec.is_repeated:
                getattr(message, name).extend(value)  # type: ignore[arg-type]
            elif spec.type == FieldDescriptor.TYPE_MESSAGE:
                getattr(message, name).CopyFrom(value)
            else:
                setattr(message, name, value)
        return message

    return st.fixed_dictionaries({}, optional=fields).map(build)


def application_files() -> st.SearchStrategy[str]:
    """Application files with random graphs: loops with and without a way out, dangling edges, deep chains."""

    @st.composite
    def draw(pick: st.DrawFn) -> str:
        count = pick(st.integers(0, 40))
        names = [f"u{index}" for index in range(count)]
        lines = [f"name: {pick(st.sampled_from(['fuzzed', 'bad name!', '']))}", "profiling_runs: 3", "units:"]
        for name in names:
            targets = pick(st.lists(st.sampled_from([*names, "end", "nowhere"]), max_size=3, unique=True))
            weights = pick(st.lists(st.floats(-1, 2), min_size=len(targets), max_size=len(targets)))
            kind = pick(st.sampled_from(["llm", "tool", "gpu"]))
            backend = "{kind: llm, model: m}" if kind == "llm" else "{kind: tool, tool: t}" if kind == "tool" else "{kind: gpu}"
            lines.append(f"  {name}:\n    backend: {backend}")
            if targets:
                lines.append("    next: {" + ", ".join(f"{t}: {w!r}" for t, w in zip(targets, weights, strict=True)) + "}")
            lines.append(f"    profile: {{input_tokens: {pick(st.integers(-5, 5000))}, tool_duration_s: {pick(st.floats(-1, 10))!r}}}")
        return "\n".join(lines)

    return draw()


@dataclass
class Tally:
    cases: int = 0
    codes: Counter[str] = field(default_factory=Counter)


def call(channel: grpc.Channel, service: str, method: MethodDescriptor, payload: bytes) -> tuple[grpc.StatusCode, str]:
    """The status of one call with a raw request; a stream is read to its first message, then cancelled."""
    path = f"/{service}/{method.name}"
    if method.server_streaming:
        # A watch that accepted its request may stay quiet: a refusal comes at once, so a second bounds the wait.
        stream = channel.unary_stream(path)(payload, timeout=1 if method.name in WAITS else 5)
        try:
            next(stream, None)
            return grpc.StatusCode.OK, ""
        except grpc.RpcError as error:
            return error.code(), error.details() or ""
        finally:
            stream.cancel()
    try:
        channel.unary_unary(path)(payload, timeout=10)
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as error:
        return error.code(), error.details() or ""


def check(tally: Tally, method: MethodDescriptor, code: grpc.StatusCode, details: str, sent: object) -> None:
    tally.cases += 1
    tally.codes[code.name] += 1
    if code == grpc.StatusCode.DEADLINE_EXCEEDED and method.name in WAITS:
        return
    assert code in ACTIONABLE, f"{method.full_name}: {code.name}: {details!r} for {sent!r:.300}"
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        assert FIELD_RULE.match(details), f"{method.full_name}: INVALID_ARGUMENT without field: rule: {details!r}"


def fuzz(channel: grpc.Channel, service_descriptor, tally: Tally,
         extra: dict[str, st.SearchStrategy[Message]] | None = None) -> None:
    for method in service_descriptor.methods:
        if not method.client_streaming:
            strategy = (extra or {}).get(method.name, messages(method.input_type))
            fuzz_method(channel, service_descriptor.full_name, method, strategy, tally)


def fuzz_method(channel: grpc.Channel, service: str, method: MethodDescriptor, strategy: st.SearchStrategy[Message],
                tally: Tally) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def generated(message: Message) -> None:
        code, details = call(channel, service, method, message.SerializeToString())
        check(tally, method, code, details, message)

    @settings(max_examples=EXAMPLES // 2, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.binary(max_size=120), st.just(b"\x1a\x03\xff\xfe\x80"), st.just(b"\x12\x02\xc3\x28")))
    def raw(payload: bytes) -> None:
        code, details = call(channel, service, method, payload)
        check(tally, method, code, details, payload)

    generated()
    raw()


def healthy(address: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def test_every_rpc_answers_generated_and_malformed_input_with_an_actionable_status(start_service):
    tokenizer = start_service("tokenizer")
    demand = start_service("demand", "--walks", "50")
    predictor = start_service("predictor", timeout_s=120)
    planner = start_service("planner")
    worker = start_service("worker", "--engine", "sim", "--sim-speedup", "500", "--worker-id", "fuzz-w0",
                           "--heartbeat-s", "0.5", "--heartbeat-ttl-s", "2")
    scheduler = start_service("scheduler", "--registry-poll-s", "0.1", "--heartbeat-ttl-s", "2", "--tokenizer-address",
                              tokenizer.address, "--demand-address", demand.address, "--predictor-address", predictor.address)
    tally = Tally()
    started = time.monotonic()
    targets: list[tuple[object, object, dict[str, st.SearchStrategy[Message]]]] = [
        (scheduler, scheduler_pb2.DESCRIPTOR.services_by_name["SchedulerService"], {}),
        (tokenizer, tokenizer_pb2.DESCRIPTOR.services_by_name["TokenizerService"], {}),
        (predictor, predictor_pb2.DESCRIPTOR.services_by_name["PredictorService"], {}),
        (demand, demand_pb2.DESCRIPTOR.services_by_name["DemandService"], {
            "RegisterApplication": application_files().map(
                lambda content: demand_pb2.RegisterApplicationRequest(application_file=content))}),
        (planner, planner_pb2.DESCRIPTOR.services_by_name["PlannerService"], {}),
        (worker, worker_pb2.DESCRIPTOR.services_by_name["WorkerService"], {}),
    ]
    for service, descriptor, extra in targets:
        with grpc.insecure_channel(service.address) as channel:  # type: ignore[attr-defined]
            fuzz(channel, descriptor, tally, extra=extra)
    elapsed_s = time.monotonic() - started
    print(f"fuzzed {tally.cases} calls in {elapsed_s:.0f} s: {dict(tally.codes)}")
    assert tally.cases > 1000
    for service, _, _ in targets:
        assert healthy(service.address), f"{service.name} stopped serving"  # type: ignore[attr-defined]
        assert service.process.poll() is None  # type: ignore[attr-defined]
    nothing_left(scheduler.address)


def nothing_left(address: str) -> None:
    """No request lingers on the workers once the fuzzed streams were cancelled."""
    deadline = time.monotonic() + 15
    with grpc.insecure_channel(address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        while True:
            loads = [info.load for info in stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5).workers]
            busy = sum(load.real_time.running + load.real_time.waiting + load.best_effort.running + load.best_effort.waiting
                       for load in loads)
            if busy == 0:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"{busy} requests left on the workers 15 s after the fuzzing")
            time.sleep(0.5)
