"""HTTP: the OpenAI-compatible front door (``/v1/completions``, ``/v1/chat/completions``, ``/v1/models``).

A FastAPI application served by uvicorn in the service's own event loop, calling the scheduler's gRPC
``SchedulerService``; ``/health`` answers while the process runs, ``/ready`` while the scheduler answers
its health check. ``--tls-cert``/``--tls-key`` serve HTTPS; ``--tls-ca`` calls the scheduler over TLS.
Routes, fields, headers and errors: docs/http.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import uvicorn

from forethought.cluster.ports import listen_failure, listen_rule
from forethought.config import ConfigError, ServiceSettings, option
from forethought.domain import MAX_TOKENS_LIMIT
from forethought.rpc.channels import channel_tls_of
from forethought.rpc.server import ServiceSpec
from forethought.services.http.app import build_app


@dataclass(frozen=True)
class Settings(ServiceSettings):
    port: int = option(8000, "HTTP port; 0 picks a free one")
    scheduler_address: str = option("127.0.0.1:50051", "scheduler service host:port")
    request_timeout_s: float = option(600.0, "seconds a generating call may take before it answers 504")
    default_max_tokens: int = option(256, "max_tokens of a request that sends neither max_tokens nor max_completion_tokens")

    def validate(self) -> None:
        super().validate()
        if not self.scheduler_address:
            raise ConfigError("scheduler_address", "must be host:port", self.scheduler_address)
        if self.request_timeout_s <= 0:
            raise ConfigError("request_timeout_s", "must be > 0", self.request_timeout_s)
        if not 1 <= self.default_max_tokens <= MAX_TOKENS_LIMIT:
            raise ConfigError("default_max_tokens", f"must be in 1..{MAX_TOKENS_LIMIT}", self.default_max_tokens)


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves the stop signals to the service runtime (``forethought.rpc.server.serve``)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[str]:
    """Serves HTTP until the context exits, then lets in-flight answers finish for up to ``grace_s``."""
    app = build_app(settings.scheduler_address, settings.request_timeout_s, settings.default_max_tokens,
                    channel_tls_of(settings))
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_config=None, access_log=False,
                            timeout_graceful_shutdown=int(settings.grace_s),
                            ssl_certfile=settings.tls_cert or None, ssl_keyfile=settings.tls_key or None)
    # uvicorn answers a port it cannot bind by exiting the process with a traceback, so ask first.
    reason = listen_failure(settings.host, settings.port)
    if reason is not None:
        raise ConfigError("port", listen_rule(settings.host, reason), settings.port)
    server = _EmbeddedServer(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():  # it stopped before listening; uvicorn logged why
            raise ConfigError("port", listen_rule(settings.host, "the HTTP server stopped before listening"), settings.port)
        await asyncio.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"{settings.host}:{port}"
    finally:
        server.should_exit = True
        await task


SERVICE = ServiceSpec("http", __doc__ or "", Settings, None, running)
