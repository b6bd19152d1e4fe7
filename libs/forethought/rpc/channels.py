"""Client channels with tracing: every outgoing call carries the W3C trace context; TLS (and a client
certificate for mutual TLS) when given ``ChannelTls``."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.instrumentation.grpc import aio_client_interceptors

from forethought.config import ServiceSettings
from forethought.rpc.server import MAX_MESSAGE_BYTES

MAX_RECONNECT_BACKOFF_MS = 2000
KEEPALIVE_TIME_MS = 10_000
"""How often a channel with calls open pings its peer. A peer that froze or vanished without closing its
connections (a stopped process, a dead host, a cut network) answers no ping, and its calls fail UNAVAILABLE
``KEEPALIVE_TIMEOUT_MS`` later instead of waiting forever; every service's server accepts pings this often
(``forethought.rpc.server.MIN_PING_INTERVAL_MS``)."""
KEEPALIVE_TIMEOUT_MS = 5_000


@dataclass(frozen=True)
class ChannelTls:
    """TLS of a client channel: the PEM root certificates it trusts, and the certificate it shows (mutual TLS)."""

    root_certs: bytes
    private_key: bytes | None = None
    certificate_chain: bytes | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(self.root_certs, self.private_key, self.certificate_chain)


def channel_tls_of(settings: ServiceSettings) -> ChannelTls | None:
    """How a service calls others: TLS trusting its ``--tls-ca``, showing its own ``--tls-cert`` (for services that
    require one); None (plaintext) without ``--tls-ca``."""
    if not settings.tls_ca:
        return None
    own = (Path(settings.tls_key).read_bytes(), Path(settings.tls_cert).read_bytes()) if settings.tls_cert else (None, None)
    return ChannelTls(Path(settings.tls_ca).read_bytes(), *own)


def open_channel(address: str, traced: bool = True, tls: ChannelTls | None = None) -> grpc.aio.Channel:
    """An async channel to ``address`` (host:port): TLS when ``tls`` is given, else plaintext.

    Args:
        traced: client tracing interceptors open a span per call and send the trace context. False on
            hot paths: grpc.aio interceptors cost a task and a wrapped stream per call, so callers pass
            ``forethought.telemetry.tracing.trace_metadata()`` as each call's metadata instead.
    """
    interceptors = aio_client_interceptors() if traced else None
    options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES), ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
               # A restarted peer is reached within 2 s; gRPC's default backoff grows to two minutes.
               ("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS),
               ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS), ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
               # gRPC waits for a ping's answer this long (a minute by default), keepalive pings included.
               ("grpc.http2.ping_timeout_ms", KEEPALIVE_TIMEOUT_MS),
               # Pings go on while a stream is quiet (a long prefill, a watch with nothing to say): gRPC stops after two.
               ("grpc.http2.max_pings_without_data", 0)]
    if tls is not None:
        return grpc.aio.secure_channel(address, tls.credentials(), interceptors=interceptors, options=options)
    return grpc.aio.insecure_channel(address, interceptors=interceptors, options=options)


async def check_health(channel: grpc.aio.Channel, service: str = "", timeout_s: float = 1.0) -> str:
    """The health status name (SERVING, NOT_SERVING, ...) or UNREACHABLE."""
    try:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=timeout_s
        )
    except grpc.aio.AioRpcError:
        return "UNREACHABLE"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


async def wait_until_serving(address: str, timeout_s: float, service: str = "", tls: ChannelTls | None = None) -> None:
    """Polls ``address``'s health until SERVING; raises TimeoutError naming the address otherwise."""
    deadline = time.monotonic() + timeout_s
    async with open_channel(address, traced=False, tls=tls) as channel:
        while time.monotonic() < deadline:
            if await check_health(channel, service) == "SERVING":
                return
            await asyncio.sleep(0.1)
    raise TimeoutError(f"{address} did not report SERVING within {timeout_s:.0f} s")
