"""The status interceptor: domain errors become their status, surprises become INTERNAL with an id."""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest
from forethought.domain import InvalidField
from forethought.rpc.errors import (
    InvalidArgument,
    ResourceExhausted,
    invalid_argument_of,
    rich_status_of,
)
from forethought.rpc.interceptors import RETRY_AFTER_KEY, StatusInterceptor
from forethought.v1 import demand_pb2, demand_pb2_grpc
from google.rpc import error_details_pb2
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


class FailingDemand(demand_pb2_grpc.DemandServiceServicer):
    async def RegisterApplication(self, request, context):
        if request.application == "bad":
            raise InvalidArgument("application", "must match [A-Za-z0-9_.-]{1,128}")
        if request.application == "broken rule":
            raise InvalidField("application", "must match [A-Za-z0-9_.-]{1,128}")  # as the domain's rules raise it
        if request.application == "full":
            raise ResourceExhausted("queue is full", retry_after_s=1.5)
        if request.application == "store down":
            raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        if request.application == "store frozen":
            raise RedisTimeoutError("Timeout reading from 127.0.0.1:6379")
        raise RuntimeError("boom")

    async def WatchPrewarm(self, request, context):
        yield demand_pb2.WatchPrewarmResponse()
        raise KeyError("lost")


@pytest.fixture
async def stub():
    server = grpc.aio.server(interceptors=[StatusInterceptor()])
    demand_pb2_grpc.add_DemandServiceServicer_to_server(FailingDemand(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield demand_pb2_grpc.DemandServiceStub(channel)
    await server.stop(0)


@pytest.mark.parametrize("application", ["bad", "broken rule"])
async def test_invalid_argument_names_the_field(stub, application):
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.RegisterApplication(demand_pb2.RegisterApplicationRequest(application=application))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == "application: must match [A-Za-z0-9_.-]{1,128}"
    status = rich_status_of(raised.value)
    assert (status.code, status.message) == (grpc.StatusCode.INVALID_ARGUMENT.value[0], raised.value.details())
    bad_request = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad_request)
    violation, = bad_request.field_violations
    assert (violation.field, violation.description) == ("application", "must match [A-Za-z0-9_.-]{1,128}")


async def test_resource_exhausted_carries_a_retry_hint(stub):
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.RegisterApplication(demand_pb2.RegisterApplicationRequest(application="full"))
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert dict(raised.value.trailing_metadata())[RETRY_AFTER_KEY] == "1.500"
    retry = error_details_pb2.RetryInfo()
    assert rich_status_of(raised.value).details[0].Unpack(retry)
    assert retry.retry_delay.ToNanoseconds() == 1_500_000_000


@pytest.mark.parametrize("application", ["store down", "store frozen"])
async def test_redis_unreachable_is_unavailable_with_a_retry_hint(stub, application):
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.RegisterApplication(demand_pb2.RegisterApplicationRequest(application=application))
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
    assert raised.value.details().startswith("the shared state (Redis) cannot be reached: ")
    assert "127.0.0.1:6379" in raised.value.details() and raised.value.details().endswith("; retry")
    retry = error_details_pb2.RetryInfo()
    assert rich_status_of(raised.value).details[0].Unpack(retry)
    assert retry.retry_delay.ToNanoseconds() == 1_000_000_000


async def test_errors_without_a_detail_carry_no_status_details(stub, caplog):
    with caplog.at_level(logging.ERROR), pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.RegisterApplication(demand_pb2.RegisterApplicationRequest(application="x"))
    assert raised.value.code() == grpc.StatusCode.INTERNAL
    assert rich_status_of(raised.value) is None


async def test_unexpected_errors_become_internal_with_a_logged_id(stub, caplog):
    with caplog.at_level(logging.ERROR):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.RegisterApplication(demand_pb2.RegisterApplicationRequest(application="x"))
    assert raised.value.code() == grpc.StatusCode.INTERNAL
    error_id = raised.value.details().rpartition(" ")[2]
    assert len(error_id) == 12
    assert any(error_id in record.getMessage() for record in caplog.records)
    # the server is still up after the failure
    with pytest.raises(grpc.aio.AioRpcError) as again:
        await stub.RegisterApplication(demand_pb2.RegisterApplicationRequest(application="bad"))
    assert again.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_stream_that_fails_midway_ends_with_internal(stub):
    call = stub.WatchPrewarm(demand_pb2.WatchPrewarmRequest())
    assert await call.read() == demand_pb2.WatchPrewarmResponse()
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call.read()
    assert raised.value.code() == grpc.StatusCode.INTERNAL


async def test_unimplemented_methods_answer_unimplemented(stub):
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.Estimate(demand_pb2.EstimateRequest())
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED


@pytest.fixture
async def traced():
    """A server whose interceptor sends spans to an in-memory exporter; yields (stub, exporter)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    server = grpc.aio.server(interceptors=[StatusInterceptor(tracer_provider=provider)])
    demand_pb2_grpc.add_DemandServiceServicer_to_server(FailingDemand(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield demand_pb2_grpc.DemandServiceStub(channel), exporter
    await server.stop(0)


async def finished_spans(exporter) -> tuple:
    """The spans ended so far, once there is one: the client sees the status before the handler's span closes."""
    for _ in range(500):
        if spans := exporter.get_finished_spans():
            return spans
        await asyncio.sleep(0.01)
    return ()


async def test_a_call_runs_in_a_server_span_under_the_callers_trace(traced):
    stub, exporter = traced
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    metadata = (("traceparent", f"00-{trace_id}-b7ad6b7169203331-01"),)
    with pytest.raises(grpc.aio.AioRpcError):
        await stub.RegisterApplication(demand_pb2.RegisterApplicationRequest(application="bad"), metadata=metadata)
    (span,) = await finished_spans(exporter)
    assert span.name == "/forethought.v1.DemandService/RegisterApplication"
    assert format(span.context.trace_id, "032x") == trace_id
    assert format(span.parent.span_id, "016x") == "b7ad6b7169203331"
    assert span.attributes["rpc.service"] == "forethought.v1.DemandService"
    assert span.attributes["rpc.grpc.status_code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert span.status.status_code.name == "ERROR"


async def test_a_call_without_trace_context_starts_a_trace_of_its_own(traced):
    stub, exporter = traced
    call = stub.WatchPrewarm(demand_pb2.WatchPrewarmRequest())
    assert await call.read() == demand_pb2.WatchPrewarmResponse()
    with pytest.raises(grpc.aio.AioRpcError):
        await call.read()
    (span,) = await finished_spans(exporter)
    assert span.name == "/forethought.v1.DemandService/WatchPrewarm"
    assert span.parent is None
    assert span.attributes["rpc.grpc.status_code"] == grpc.StatusCode.INTERNAL.value[0]


async def test_an_invalid_argument_from_downstream_is_rebuilt_with_its_field_and_rule(stub):
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.RegisterApplication(demand_pb2.RegisterApplicationRequest(application="bad"))
    passed_on = invalid_argument_of(raised.value)
    assert (passed_on.field, passed_on.rule) == ("application", "must match [A-Za-z0-9_.-]{1,128}")


class EndlessDemand(demand_pb2_grpc.DemandServiceServicer):
    """A stream that goes on until the client cancels it; records the span it runs in and its own clean-up."""

    def __init__(self) -> None:
        self.current_spans: list[int] = []
        self.closed = asyncio.Event()

    async def WatchPrewarm(self, request, context):
        from opentelemetry import trace

        try:
            while True:
                self.current_spans.append(trace.get_current_span().get_span_context().span_id)
                yield demand_pb2.WatchPrewarmResponse()  # no await between: cancelled while parked at the yield
        finally:
            self.closed.set()


async def test_a_stream_cancelled_by_its_client_ends_its_span_cancelled_and_cleans_up(caplog):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    servicer = EndlessDemand()
    server = grpc.aio.server(interceptors=[StatusInterceptor(tracer_provider=provider)])
    demand_pb2_grpc.add_DemandServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            for _ in range(3):
                call = demand_pb2_grpc.DemandServiceStub(channel).WatchPrewarm(demand_pb2.WatchPrewarmRequest())
                for _ in range(3):
                    assert await call.read() == demand_pb2.WatchPrewarmResponse()
                call.cancel()
                await asyncio.wait_for(servicer.closed.wait(), 10)
                servicer.closed.clear()
        spans = await finished_spans(exporter)
        for _ in range(100):
            if len(spans := exporter.get_finished_spans()) == 3:
                break
            await asyncio.sleep(0.01)
    finally:
        await server.stop(0)
    assert len(spans) == 3
    assert {span.attributes["rpc.grpc.status_code"] for span in spans} == {grpc.StatusCode.CANCELLED.value[0]}
    assert set(servicer.current_spans) == {span.context.span_id for span in spans}  # the handler ran in its span
    assert not [record for record in caplog.records if "detach" in record.getMessage()]
