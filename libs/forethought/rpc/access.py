"""Bearer-token authentication of one gRPC service: ``authorization: Bearer <token>`` on every call.

``AccessInterceptor`` refuses, with UNAUTHENTICATED, any call to the guarded service whose token finds no
tenant; other services on the server (health, reflection) stay open, so probes need no token. An accepted
call goes to its handler untouched (no extra wrapping on the hot path); the service finds the caller's
tenant again with ``bearer_token`` where it needs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from forethought.access import TenantBook
from forethought.telemetry.metrics import RPC_REQUESTS

AUTHORIZATION_KEY = "authorization"
BEARER = "bearer "


def bearer_token(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The token of the call's ``authorization: Bearer <token>`` metadata; None when it has none."""
    for key, value in metadata or ():
        if key == AUTHORIZATION_KEY and isinstance(value, str) and value[:len(BEARER)].lower() == BEARER:
            return value[len(BEARER):].strip() or None
    return None


def bearer_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """The metadata a client sends to authenticate with ``token`` (nothing when None)."""
    return ((AUTHORIZATION_KEY, f"Bearer {token}"),) if token else ()


class AccessInterceptor(grpc.aio.ServerInterceptor):
    """Refuses calls to ``service`` (its full name) whose bearer token ``book`` does not know."""

    def __init__(self, book: TenantBook, service: str) -> None:
        self._book = book
        self._prefix = f"/{service}/"
        self._refusals: dict[str, grpc.RpcMethodHandler] = {}  # method -> its refusing handler, built once

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        if not details.method.startswith(self._prefix):
            return await continuation(details)
        token = bearer_token(details.invocation_metadata)  # type: ignore[attr-defined]
        if self._book.tenant_of(token) is not None:
            return await continuation(details)
        refusal = self._refusals.get(details.method)
        if refusal is None:
            handler = await continuation(details)
            if handler is None:
                return handler
            refusal = self._refusals[details.method] = _refusing(handler, details.method)
        return refusal


def _refusing(handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
    """A handler of the same shape as ``handler`` that answers UNAUTHENTICATED (and counts it, as the status
    interceptor it never reaches would)."""
    message = "missing or unknown bearer token: send metadata `authorization: Bearer <token>`"
    service, _, name = method.rpartition("/")
    counted = RPC_REQUESTS.labels(service.rpartition(".")[2], name, grpc.StatusCode.UNAUTHENTICATED.name)

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        counted.inc()
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def streaming(request: Any, context: grpc.aio.ServicerContext) -> Any:
        counted.inc()
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        yield  # NOTE: unreachable; makes this an async generator, the shape a streaming handler has

    kinds = {"unary_unary": (unary, grpc.unary_unary_rpc_method_handler),
             "unary_stream": (streaming, grpc.unary_stream_rpc_method_handler),
             "stream_unary": (unary, grpc.stream_unary_rpc_method_handler),
             "stream_stream": (streaming, grpc.stream_stream_rpc_method_handler)}
    for kind, (behaviour, make) in kinds.items():
        if getattr(handler, kind):
            return make(behaviour, request_deserializer=handler.request_deserializer,
                        response_serializer=handler.response_serializer)
    return handler
