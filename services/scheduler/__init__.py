"""Scheduler: the front door. Places every request on a worker and relays its token stream.

Workers come from the Redis registry; the prompt's block hashes are matched against the Redis prefix
index so placement knows which worker caches what; the router is chosen by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

import grpc
import redis.asyncio as aioredis

from forethought.cluster.registry import WorkerRegistry
from forethought.config import ConfigError, ServiceSettings, option
from forethought.rpc.channels import open_channel
from forethought.routing import build_router
from forethought.services.scheduler.pool import WorkerPool
from forethought.services.scheduler.servicer import SchedulerServicer
from forethought.v1 import scheduler_pb2_grpc, tokenizer_pb2_grpc

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings(ServiceSettings):
    port: int = option(50051, "gRPC port; 0 picks a free one")
    tokenizer_address: str = option("", "tokenizer service host:port; empty = token-id prompts only")
    router: str = option("round_robin", "placement policy by name (see docs/routing.md)")
    block_size: int = option(16, "tokens per block of the prefix index")
    registry_poll_s: float = option(0.5, "seconds between reads of the worker registry")
    heartbeat_ttl_s: float = option(5.0, "a worker whose heartbeat is older than this is dead")

    def validate(self) -> None:
        super().validate()
        if self.block_size < 1:
            raise ConfigError("block_size", "must be >= 1", self.block_size)
        if self.registry_poll_s <= 0:
            raise ConfigError("registry_poll_s", "must be > 0", self.registry_poll_s)


class SchedulerShell:
    grpc_service_name = "forethought.v1.SchedulerService"

    def __init__(self, settings: Settings) -> None:
        from forethought.prefix.redis_index import RedisPrefixIndex

        self._settings = settings
        self._redis = aioredis.from_url(settings.redis_url)
        self._registry = WorkerRegistry(self._redis, settings.namespace, ttl_s=settings.heartbeat_ttl_s)
        self._index = RedisPrefixIndex(self._redis, settings.namespace)
        self._router = build_router(settings.router)
        self._pool = WorkerPool()
        self._tokenizer_channel = open_channel(settings.tokenizer_address) if settings.tokenizer_address else None
        self._watch: asyncio.Task[None] | None = None

    def register(self, server: grpc.aio.Server) -> None:
        tokenizer = tokenizer_pb2_grpc.TokenizerServiceStub(self._tokenizer_channel) if self._tokenizer_channel else None
        servicer = SchedulerServicer(
            self._pool, self._registry, self._router, self._index.match, tokenizer,
            self._settings.block_size, self._settings.heartbeat_ttl_s,
        )
        scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(servicer, server)

    async def start(self, address: str) -> None:
        await self._refresh_workers()
        self._watch = asyncio.create_task(self._watch_registry())

    async def drain(self) -> None:
        return None

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        await self._pool.close()
        if self._tokenizer_channel is not None:
            await self._tokenizer_channel.close()
        await self._redis.aclose()

    async def _refresh_workers(self) -> None:
        added, removed = self._pool.refresh(await self._registry.workers())
        now = time.monotonic()
        for worker_id in removed:
            self._router.remove_worker(worker_id, now)
        for worker_id in added:
            self._router.add_worker(worker_id, now)

    async def _watch_registry(self) -> None:
        while True:
            await asyncio.sleep(self._settings.registry_poll_s)
            try:
                await self._refresh_workers()
            except Exception:  # noqa: BLE001 - keep serving with the last known workers
                log.warning("reading the worker registry failed; keeping the last known workers", exc_info=True)


def build(settings: Settings) -> SchedulerShell:
    return SchedulerShell(settings)
