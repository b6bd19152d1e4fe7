"""The server interceptor every service runs: status mapping, error ids, metrics.

Domain errors (``forethought.rpc.errors``) become their status with a message naming the field and
rule; anything unexpected becomes INTERNAL with an error id that is also logged with its traceback,
so the process never dies of a bad request and an operator can find the cause from the client's error.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc

from forethought.rpc.errors import ResourceExhausted, ServiceError
from forethought.telemetry.metrics import RPC_LATENCY, RPC_REQUESTS

log = logging.getLogger(__name__)

RETRY_AFTER_KEY = "retry-after-s"


class StatusInterceptor(grpc.aio.ServerInterceptor):
    """Maps exceptions to statuses and records per-method call counts and latencies."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        service, _, method = details.method.rpartition("/")
        labels = (service.rpartition(".")[2], method)
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                _unary(handler.unary_unary, labels),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                _streaming(handler.unary_stream, labels),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream:
            return grpc.stream_stream_rpc_method_handler(
                _streaming(handler.stream_stream, labels),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler


def _unary(behaviour: Callable[..., Awaitable[Any]], labels: tuple[str, str]) -> Callable[..., Awaitable[Any]]:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        async with _guarded(context, labels):
            return await behaviour(request, context)

    return call


def _streaming(behaviour: Callable[..., AsyncIterator[Any]], labels: tuple[str, str]) -> Callable[..., AsyncIterator[Any]]:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async with _guarded(context, labels):
            async for response in behaviour(request, context):
                yield response

    return call


@asynccontextmanager
async def _guarded(context: grpc.aio.ServicerContext, labels: tuple[str, str]) -> AsyncIterator[None]:
    """Turns what the handler raises into its status, and records the call's code and duration."""
    started = time.perf_counter()
    code = grpc.StatusCode.OK
    try:
        yield
    except asyncio.CancelledError:
        code = grpc.StatusCode.CANCELLED
        raise
    except Exception as error:  # noqa: BLE001 - every failure must become a status
        code = _code_of(error, context)
        await _abort(error, context, labels)
    finally:
        _record(labels, code, started)


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
        if isinstance(error, ResourceExhausted):
            context.set_trailing_metadata(((RETRY_AFTER_KEY, f"{error.retry_after_s:.3f}"),))
        await context.abort(error.code, error.message)
    if isinstance(error, NotImplementedError):
        # The generated base servicer raises this for RPCs a service does not offer yet.
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{labels[0]}/{labels[1]} is not implemented by this server")
    error_id = uuid.uuid4().hex[:12]
    log.error("internal error %s in %s/%s", error_id, *labels, exc_info=error)
    await context.abort(grpc.StatusCode.INTERNAL, f"internal error, id {error_id}")


def _record(labels: tuple[str, str], code: grpc.StatusCode, started: float) -> None:
    RPC_REQUESTS.labels(*labels, code.name).inc()
    RPC_LATENCY.labels(*labels).observe(time.perf_counter() - started)
