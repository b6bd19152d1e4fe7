"""Client channels with tracing: every outgoing call carries the W3C trace context; TLS when given root certificates."""

from __future__ import annotations

import asyncio
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.instrumentation.grpc import aio_client_interceptors

from forethought.rpc.server import MAX_MESSAGE_BYTES


def open_channel(address: str, traced: bool = True, root_certs: bytes | None = None) -> grpc.aio.Channel:
    """An async channel to ``address`` (host:port): TLS trusting ``root_certs`` (PEM) when given, else plaintext.

    Args:
        traced: client tracing interceptors open a span per call and send the trace context. False on
            hot paths: grpc.aio interceptors cost a task and a wrapped stream per call, so callers pass
            ``forethought.telemetry.tracing.trace_metadata()`` as each call's metadata instead.
    """
    interceptors = aio_client_interceptors() if traced else None
    options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES), ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
    if root_certs is not None:
        credentials = grpc.ssl_channel_credentials(root_certificates=root_certs)
        return grpc.aio.secure_channel(address, credentials, interceptors=interceptors, options=options)
    return grpc.aio.insecure_channel(address, interceptors=interceptors, options=options)


def root_certs_of(path: str) -> bytes | None:
    """The PEM root certificates at ``path`` (a ``--tls-ca`` setting); None for an empty path (plaintext)."""
    if not path:
        return None
    with open(path, "rb") as file:
        return file.read()


async def check_health(channel: grpc.aio.Channel, service: str = "", timeout_s: float = 1.0) -> str:
    """The health status name (SERVING, NOT_SERVING, ...) or UNREACHABLE."""
    try:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=timeout_s
        )
    except grpc.aio.AioRpcError:
        return "UNREACHABLE"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


async def wait_until_serving(address: str, timeout_s: float, service: str = "", root_certs: bytes | None = None) -> None:
    """Polls ``address``'s health until SERVING; raises TimeoutError naming the address otherwise."""
    deadline = time.monotonic() + timeout_s
    async with open_channel(address, traced=False, root_certs=root_certs) as channel:
        while time.monotonic() < deadline:
            if await check_health(channel, service) == "SERVING":
                return
            await asyncio.sleep(0.1)
    raise TimeoutError(f"{address} did not report SERVING within {timeout_s:.0f} s")
