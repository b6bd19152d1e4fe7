"""The one way every service starts: an async gRPC server with health, reflection, tracing, metrics,
status mapping and a graceful stop on SIGTERM or SIGINT.

A service's shell (``forethought.services.<name>.shell``) declares a ``ServiceSpec``: its name, its
``Settings`` (a ``ServiceSettings`` subclass) and ``build(settings) -> Service``; this module does
everything else. A shell that can no longer serve (a background task it needs ended, its engine died)
says so through ``failure()``: the service turns NOT_SERVING, drains and exits with status 1, so that its
supervisor (Kubernetes, compose's restart policy) starts it again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from forethought.cluster.ports import listen_failure, listen_rule
from forethought.config import ConfigError, MissingPrerequisite, ServiceSettings, add_arguments, describe, settings_from
from forethought.rpc.interceptors import StatusInterceptor
from forethought.telemetry.logs import configure_logging
from forethought.telemetry.metrics import start_metrics_server
from forethought.telemetry.tracing import configure_tracing

log = logging.getLogger(__name__)

READY_MARKER = "FORETHOUGHT_READY"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
RECANCEL_S = 0.5  # how long a stopping shell waits on a cancelled task before cancelling it again
FAILURE_POLL_S = 1.0  # how often a serving shell is asked whether it can still serve
MIN_PING_INTERVAL_MS = 5_000
"""The shortest gap between a client's pings that the server accepts: below the clients' keepalive
(``forethought.rpc.channels.KEEPALIVE_TIME_MS``). gRPC's default, five minutes, answers a client that pings
more often on a quiet stream with GOAWAY, which would cut long healthy calls."""
CLIENT_KEEPALIVE_TIME_MS = 60_000
"""How often the server pings each connected client, so that a client that froze or vanished does not hold a
stream (and the work behind it) forever: gRPC's default is two hours."""
CLIENT_KEEPALIVE_TIMEOUT_MS = 20_000


class Service(Protocol):
    """A service's shell: registers its servicer and owns its resources."""

    grpc_service_name: str  # full name, e.g. "forethought.v1.WorkerService"

    def register(self, server: grpc.aio.Server) -> None:
        """Adds the servicer to ``server``."""

    async def start(self, address: str) -> None:
        """Opens connections and background tasks once the server listens on ``address``."""

    async def drain(self) -> None:
        """Shutdown began: stop taking new work elsewhere (e.g. leave the worker registry)."""

    async def stop(self) -> None:
        """In-flight calls are done: release every resource."""

    def failure(self) -> str | None:
        """Why the shell can no longer serve; None while it can (asked every ``FAILURE_POLL_S`` while serving)."""


@dataclass
class PlainService:
    """A service that owns nothing beyond its servicer (and perhaps a warm-up at start)."""

    grpc_service_name: str
    add_to_server: Callable[[Any, grpc.aio.Server], None]
    servicer: Any
    warm_up: Callable[[], Awaitable[None]] | None = None

    def register(self, server: grpc.aio.Server) -> None:
        self.add_to_server(self.servicer, server)

    async def start(self, address: str) -> None:
        if self.warm_up is not None:
            await self.warm_up()

    async def drain(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def failure(self) -> str | None:
        return None


def ended_task(tasks: Sequence[asyncio.Task[None]]) -> str | None:
    """A shell's ``failure`` from its background tasks, each of which runs as long as the shell serves: the
    first that ended, with what it raised; None while all run."""
    for task in tasks:
        if task.done():
            error = None if task.cancelled() else task.exception()
            name = task.get_name()
            return f"its task {name} ended: {type(error).__name__}: {error}" if error else f"its task {name} ended"
    return None


async def cancel_tasks(tasks: Sequence[asyncio.Task[None]]) -> None:
    """Cancels a shell's background tasks and waits for them; one that had already failed does not stop the stop.

    A task still running after ``RECANCEL_S`` is cancelled again: a client library may turn a cancel that
    lands in its call into an error of its own, which a retrying loop then logs and goes on from.
    """
    for task in tasks:
        task.cancel()
    pending: set[asyncio.Task[None]] = set(tasks)
    while pending:
        _, pending = await asyncio.wait(pending, timeout=RECANCEL_S)
        for task in pending:
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)  # retrieves their errors; all are done


@dataclass(frozen=True)
class ServiceSpec:
    """What ``serve`` needs of a service: its name, help text, settings type and how to build its shell."""

    name: str
    description: str
    settings_type: type[ServiceSettings]
    build: Callable[[Any], Service] | None
    """Builds a gRPC service's shell from its settings, for ``running_service``."""
    running: Callable[[Any], AbstractAsyncContextManager[str]] | None = None
    """Runs a service that is no gRPC server (the HTTP front door), whose ``build`` is None: given its
    settings, it serves, yields its address, and stops gracefully on exit."""
    interceptors: Callable[[Any], Sequence[grpc.aio.ServerInterceptor]] = lambda service: ()
    """The built shell's own interceptors (the scheduler's authentication), run before the status interceptor."""


@asynccontextmanager
async def running_service(spec: ServiceSpec, settings: ServiceSettings, service: Service | None = None,
                          on_failure: Callable[[str], None] | None = None) -> AsyncIterator[str]:
    """Runs the service in this event loop; yields its address; stops it gracefully on exit.

    ``service``: a shell built by the caller (a benchmark sharing one engine), instead of ``spec.build(settings)``.
    ``on_failure``: called with the reason once the shell reports it can no longer serve (its health is then
    NOT_SERVING already); ``serve`` stops the process with it.
    """
    if service is None:
        if spec.build is None:
            raise TypeError(f"{spec.name} is no gRPC service: run it with spec.running")
        service = spec.build(settings)
    server = grpc.aio.server(
        # The status interceptor also opens the server span: one interceptor layer per call, besides the shell's.
        interceptors=[*spec.interceptors(service), StatusInterceptor()],
        options=[("grpc.max_send_message_length", MAX_MESSAGE_BYTES), ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.http2.min_ping_interval_without_data_ms", MIN_PING_INTERVAL_MS),
                 ("grpc.keepalive_permit_without_calls", 1),  # a ping racing a call's end is no abuse
                 ("grpc.keepalive_time_ms", CLIENT_KEEPALIVE_TIME_MS),
                 ("grpc.keepalive_timeout_ms", CLIENT_KEEPALIVE_TIMEOUT_MS),
                 ("grpc.http2.ping_timeout_ms", CLIENT_KEEPALIVE_TIMEOUT_MS),
                 ("grpc.so_reuseport", 0)],  # a port another server holds is refused, never shared with it
    )
    service.register(server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (service.grpc_service_name, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME),
        server,
    )
    # The servicer starts with the whole server SERVING; nothing is, until the shell has started.
    await health_servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    credentials = server_credentials(settings)
    listen = f"{settings.host}:{settings.port}"
    # Asked first: grpcio's own refusal says only "Failed to bind", and logs the reason from its C core.
    reason, port = listen_failure(settings.host, settings.port), 0
    if reason is None:
        with contextlib.suppress(RuntimeError):
            port = server.add_secure_port(listen, credentials) if credentials else server.add_insecure_port(listen)
    if port == 0:
        raise ConfigError("port", listen_rule(settings.host, reason or "gRPC could not bind it"), settings.port)
    address = f"{settings.host}:{port}"
    await server.start()
    watchdog: list[asyncio.Task[None]] = []
    try:
        await service.start(address)
        health_names = ("", service.grpc_service_name)
        for health_name in health_names:
            await health_servicer.set(health_name, health_pb2.HealthCheckResponse.SERVING)
        watchdog.append(asyncio.create_task(_watch_failure(spec.name, service, health_servicer, health_names, on_failure),
                                            name=f"{spec.name}-failure-watch"))
        yield address
    finally:
        await cancel_tasks(watchdog)
        await health_servicer.enter_graceful_shutdown()
        await service.drain()
        await server.stop(settings.grace_s)
        await service.stop()


async def _watch_failure(name: str, service: Service, health_servicer: health.aio.HealthServicer,
                         health_names: Sequence[str], on_failure: Callable[[str], None] | None) -> None:
    while (reason := service.failure()) is None:
        await asyncio.sleep(FAILURE_POLL_S)
    log.critical("%s cannot serve any more: %s", name, reason)
    for health_name in health_names:
        await health_servicer.set(health_name, health_pb2.HealthCheckResponse.NOT_SERVING)
    if on_failure is not None:
        on_failure(reason)


def server_credentials(settings: ServiceSettings) -> grpc.ServerCredentials | None:
    """TLS with the service's ``--tls-cert`` and ``--tls-key``, requiring a client certificate that chains to
    ``--tls-client-ca`` when set (mutual TLS); None (plaintext) without a certificate."""
    if not settings.tls_cert:
        return None
    with open(settings.tls_key, "rb") as key, open(settings.tls_cert, "rb") as chain:
        pair = (key.read(), chain.read())
    if not settings.tls_client_ca:
        return grpc.ssl_server_credentials([pair])
    with open(settings.tls_client_ca, "rb") as client_ca:
        return grpc.ssl_server_credentials([pair], root_certificates=client_ca.read(), require_client_auth=True)


async def serve(spec: ServiceSpec, settings: ServiceSettings) -> int:
    """Runs the service until SIGTERM or SIGINT, then drains in-flight calls and returns 0; or until its shell
    can no longer serve, then drains likewise and returns 1."""
    name = spec.name
    configure_logging(name, settings.log_format, settings.log_level)
    configure_tracing(name, settings.otel_exporter, settings.otel_endpoint)
    for line in describe(settings):
        log.debug("setting %s", line)
    if settings.metrics_port >= 0:
        try:
            metrics_port = start_metrics_server(settings.host, settings.metrics_port)
        except OSError as error:
            raise ConfigError("metrics_port", listen_rule(settings.host, error.strerror or str(error)),
                              settings.metrics_port) from error
        log.info("metrics on http://%s:%d/metrics", settings.host, metrics_port)
    stop = asyncio.Event()
    starting = asyncio.current_task()  # None once serving: a signal then drains instead of ending the start
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        # A start may wait long (for its Redis, for a model to load): a signal then ends the start itself.
        if starting is not None and not stop.is_set():
            starting.cancel()
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    failures: list[str] = []

    def failed(reason: str) -> None:
        failures.append(reason)
        stop.set()

    try:
        async with (spec.running(settings) if spec.running else running_service(spec, settings, on_failure=failed)) as address:
            starting = None
            log.info("%s serving on %s", name, address)
            print(f"{READY_MARKER} {name} {address}", flush=True)
            await stop.wait()
            log.info("%s stopping: draining in-flight calls for up to %.1f s", name, settings.grace_s)
    except asyncio.CancelledError:
        if starting is None or not stop.is_set():
            raise
        starting.uncancel()
        log.info("%s stopped before it was serving", name)
        return 0
    log.info("%s stopped%s", name, f" ({failures[0]}): exit status 1" if failures else "")
    return 1 if failures else 0


def parse_settings(spec: ServiceSpec, argv: Sequence[str] | None = None) -> ServiceSettings:
    """The service's validated settings from its flags (``argv``; None: the process's own), else the
    environment, else the defaults; ``ConfigError`` names the first setting that breaks its rule."""
    parser = argparse.ArgumentParser(prog=f"forethought serve {spec.name}", description=spec.description)
    add_arguments(parser, spec.settings_type)
    return settings_from(spec.settings_type, parser.parse_args(argv))


def main(spec: ServiceSpec, argv: list[str] | None = None) -> int:
    """Entry point of ``forethought serve <name>`` and ``python -m forethought.services.<name>``."""
    name = spec.name
    try:
        settings = parse_settings(spec, argv)
    except ConfigError as error:
        print(f"forethought {name}: {error}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(serve(spec, settings))
    except (MissingPrerequisite, ConfigError) as error:  # ConfigError: a port it cannot listen on
        print(f"forethought {name}: cannot start: {error}", file=sys.stderr)
        return 2
