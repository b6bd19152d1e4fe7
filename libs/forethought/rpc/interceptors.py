"""The server interceptor every service runs: the call's server span, status mapping, error ids, metrics.

Service errors (``forethought.rpc.errors``) and broken request rules (``forethought.domain.InvalidField``)
become their status with a message naming the field and rule; anything unexpected becomes INTERNAL with an
error id that is also logged with its traceback, so the process never dies of a bad request and an
operator can find the cause from the client's error.

Every call runs inside a server span named after the method (``/forethought.v1.WorkerService/Generate``)
whose parent is the W3C trace context the caller sent, so one trace follows a request across services.
One interceptor does all of it: each extra grpc.aio interceptor wraps every streamed message in one
more async generator, which a scheduler placing thousands of calls a second pays for on every call.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from forethought.rpc.errors import (
    STATUS_DETAILS_KEY,
    InvalidArgument,
    ResourceExhausted,
    ServiceError,
    service_error_of,
)
from forethought.telemetry.metrics import RPC_LATENCY, RPC_REQUESTS

log = logging.getLogger(__name__)

RETRY_AFTER_KEY = "retry-after-s"
"""Trailing metadata with ``RetryInfo``'s delay in seconds, for callers that read metadata but not status details."""


class StatusInterceptor(grpc.aio.ServerInterceptor):
    """Opens each call's server span, maps exceptions to statuses, records per-method counts and latencies.

    Args:
        tracer_provider: where spans go; the global provider (``configure_tracing``) by default.
    """

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer("forethought.rpc", tracer_provider=tracer_provider)
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}  # method -> its guarded handler, built once

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        wrapped = self._wrapped.get(details.method)
        if wrapped is None:
            handler = await continuation(details)
            if handler is None:
                return handler
            wrapped = self._wrapped[details.method] = _guard(handler, details.method, self._tracer)
        return wrapped


def _guard(handler: grpc.RpcMethodHandler, method: str, tracer: trace.Tracer) -> grpc.RpcMethodHandler:
    service, _, name = method.rpartition("/")
    attributes = {"rpc.system": "grpc", "rpc.service": service.lstrip("/"), "rpc.method": name}
    call = _Call(method, (service.rpartition(".")[2], name), attributes, tracer)
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(
            _unary(handler.unary_unary, call),
            request_deserializer=_lenient(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(
            _streaming(handler.unary_stream, call),
            request_deserializer=_lenient(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )
    if handler.stream_stream:
        return grpc.stream_stream_rpc_method_handler(
            _streaming(handler.stream_stream, call),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return handler


@dataclass(frozen=True)
class _Undecodable:
    """A request whose bytes are not a valid message (invalid UTF-8 in a string field, a truncated field)."""

    reason: str


def _lenient(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """The deserializer, turning a parse failure into a value the handler refuses by name (the gRPC
    library would answer INTERNAL for it, as if the service had failed)."""
    if deserialize is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except DecodeError as error:
            return _Undecodable(str(error))

    return parse


def _require_decoded(request: Any) -> None:
    if isinstance(request, _Undecodable):
        raise InvalidArgument("request", f"is not a valid message: {request.reason} (a string field must be UTF-8)")


@dataclass(frozen=True)
class _Call:
    """What every call of one method shares: the span's name and attributes, the metric labels, the tracer."""

    method: str  # /pkg.Service/Method
    labels: tuple[str, str]  # (Service, Method)
    attributes: dict[str, str]
    tracer: trace.Tracer


def _unary(behaviour: Callable[..., Awaitable[Any]], call: _Call) -> Callable[..., Awaitable[Any]]:
    async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
        async with _guarded(context, call):
            _require_decoded(request)
            return await behaviour(request, context)

    return handle


def _streaming(behaviour: Callable[..., AsyncIterator[Any]], call: _Call) -> Callable[..., AsyncIterator[Any]]:
    async def handle(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async with _guarded(context, call, current=False) as span, aclosing(behaviour(request, context)) as responses:
            _require_decoded(request)
            while True:
                # The span is current only while the handler runs, never across a yield: a stream closed while
                # parked there is closed from another context, where the span's context could not be detached.
                attached = otel_context.attach(trace.set_span_in_context(span))
                try:
                    response = await anext(responses)
                except StopAsyncIteration:
                    return
                finally:
                    otel_context.detach(attached)
                yield response

    return handle


@asynccontextmanager
async def _guarded(context: grpc.aio.ServicerContext, call: _Call, current: bool = True) -> AsyncIterator[trace.Span]:
    """Runs the handler in its server span (the current span with ``current``), turns what it raises into its
    status, records code and duration."""
    started = time.perf_counter()
    code = grpc.StatusCode.OK
    parent = propagate.extract(dict(context.invocation_metadata() or ()))
    span = call.tracer.start_span(call.method, context=parent, kind=trace.SpanKind.SERVER, attributes=call.attributes,
                                  record_exception=False, set_status_on_exception=False)
    with (trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False) if current
          else _ending(span)):
        try:
            yield span
        except (asyncio.CancelledError, GeneratorExit):  # a stream closed while parked at a yield gets GeneratorExit
            code = grpc.StatusCode.CANCELLED
            raise
        except Exception as raised:
            error = service_error_of(raised)
            code = _code_of(error, context)
            span.set_status(trace.Status(trace.StatusCode.ERROR, f"{code.name}: {error}"))
            await _abort(error, context, call.labels)
        finally:
            span.set_attribute("rpc.grpc.status_code", code.value[0])
            _record(call.labels, code, started)


@contextmanager
def _ending(span: trace.Span) -> Iterator[None]:
    try:
        yield
    finally:
        span.end()


def _code_of(error: Exception, context: grpc.aio.ServicerContext) -> grpc.StatusCode:
    if isinstance(error, ServiceError):
        return error.code
    if isinstance(error, grpc.aio.AbortError):
        return context.code() or grpc.StatusCode.UNKNOWN
    if isinstance(error, NotImplementedError):
        return grpc.StatusCode.UNIMPLEMENTED
    return grpc.StatusCode.INTERNAL


async def _abort(error: Exception, context: grpc.aio.ServicerContext, labels: tuple[str, str]) -> None:
    """Aborts the call with the status ``error`` maps to (always raises); re-raises aborts under way."""
    if isinstance(error, grpc.aio.AbortError):
        raise error
    if isinstance(error, ServiceError):
        trailing: list[tuple[str, str | bytes]] = []
        status = error.rich_status()
        if status.details:
            trailing.append((STATUS_DETAILS_KEY, status.SerializeToString()))
        if isinstance(error, ResourceExhausted):
            trailing.append((RETRY_AFTER_KEY, f"{error.retry_after_s:.3f}"))
        await context.abort(error.code, error.message, tuple(trailing))
    if isinstance(error, NotImplementedError):
        # The generated base servicer raises this for RPCs a service does not offer yet.
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{labels[0]}/{labels[1]} is not implemented by this server")
    error_id = uuid.uuid4().hex[:12]
    log.error("internal error %s in %s/%s", error_id, *labels, exc_info=error)
    await context.abort(grpc.StatusCode.INTERNAL, f"internal error, id {error_id}")


def _record(labels: tuple[str, str], code: grpc.StatusCode, started: float) -> None:
    RPC_REQUESTS.labels(*labels, code.name).inc()
    RPC_LATENCY.labels(*labels).observe(time.perf_counter() - started)
