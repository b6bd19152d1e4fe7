"""Worker: one inference engine (native sim, vLLM, or the null engine of benchmarks) behind WorkerService,
registered in Redis.

The shell loads the primary model at start (more with LoadModel), registers the worker with heartbeats
carrying its load, writes the primary engine's prefix-cache events into the Redis prefix index under
the worker's id (so the scheduler knows what it caches), and runs the prewarm agent (Hermes 3.4). Its
engines' stats and prewarm tallies are Prometheus metrics (``forethought.services.worker.metrics``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import grpc
from prometheus_client import Counter

from forethought.backends.protocol import EngineBackend
from forethought.cluster.redis_client import connect_redis, wait_for_redis
from forethought.cluster.registry import WorkerRecord, WorkerRegistry
from forethought.config import ConfigError, ServiceSettings, one_of, option
from forethought.costmodel import profile_names
from forethought.domain import CacheEvent
from forethought.prewarm import (
    DockerContainerLauncher,
    ModelLifecycle,
    PrewarmAgent,
    PrewarmKind,
    ProcessPoolSandbox,
)
from forethought.rpc.server import ServiceSpec, cancel_tasks, ended_task
from forethought.services.worker.metrics import WORKER_STATS, WorkerReading
from forethought.services.worker.servicer import WorkerServicer
from forethought.v1 import worker_pb2_grpc

log = logging.getLogger(__name__)

REPUBLISHED_BLOCKS = Counter(
    "forethought_worker_republished_blocks_total",
    "cached blocks a worker published again after the prefix index lost them (Redis restarted or flushed)",
)
ENGINES = ("sim", "vllm", "null")
NAMESAKE_POLL_S = 0.25  # how often a starting worker reads an entry of its id that another address wrote
VLLM_DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Settings(ServiceSettings):
    port: int = option(50061, "gRPC port; 0 picks a free one")
    engine: str = option("sim", f"inference engine: one of {', '.join(ENGINES)}")
    model: str = option("SmolLM2-135M-Instruct", "model name or Hugging Face folder")
    worker_id: str = option("", "id in the registry, one no other live worker holds; empty = <hostname>-<port>-<pid>")
    advertise_address: str = option("", "host:port the scheduler dials; empty = the listening address")
    capacity: int = option(64, "requests the worker may hold in flight")
    heartbeat_s: float = option(1.0, "seconds between registry heartbeats")
    heartbeat_ttl_s: float = option(5.0, "seconds after the last heartbeat at which the worker counts as dead")
    sim_profile: str = option("smollm2-135m-cpu2", "cost-model profile of the sim engine (docs/costmodel.md)")
    sim_speedup: float = option(1.0, "sim engine: modelled time is divided by this")
    sim_kv_blocks: int = option(2048, "sim and null engines: KV blocks of 16 tokens")
    sim_load_s: float = option(0.0, "sim engine: real seconds each model's load takes (the primary model's at start, "
                               "each LoadModel's), as a real engine's; not divided by sim_speedup")
    devices: int = option(0, "devices LoadModel's tensor_parallel_size may split a model over; 0 = the GPUs vLLM "
                          "sees (1 on a CPU), 8 for sim and null (a simulated node)")
    vllm_kv_cache_gib: float = option(1.0, "vLLM on CPU: KV cache space in GiB")
    vllm_max_model_len: int = option(2048, "vLLM: longest prompt plus output, in tokens")
    vllm_dtype: str = option(
        "auto", "vLLM: compute dtype; auto = float32 on a CPU, the model's own on a GPU (docs/vllm.md)"
    )
    vllm_enable_lora: bool = option(False, "vLLM: serve LoRA adapters (needed to prewarm them)")
    vllm_bros_scheduler: bool = option(False, "vLLM: BROS priority packing and adaptive batch size (docs/vllm.md)")
    prewarm_ttl_s: float = option(60.0, "seconds a prewarmed, unused backend is kept before it counts as waste")
    tool_container_image: str = option("python:3.11-slim", "image of the container tool launcher")

    def validate(self) -> None:
        super().validate()
        if self.engine not in ENGINES:
            raise ConfigError("engine", one_of(ENGINES), self.engine)
        if self.capacity < 1:
            raise ConfigError("capacity", "must be >= 1", self.capacity)
        if not 0 < self.heartbeat_s < self.heartbeat_ttl_s:
            raise ConfigError("heartbeat_s", "must be > 0 and below heartbeat_ttl_s", self.heartbeat_s)
        if self.sim_profile not in profile_names():
            raise ConfigError("sim_profile", one_of(profile_names()), self.sim_profile)
        if self.vllm_dtype not in VLLM_DTYPES:
            raise ConfigError("vllm_dtype", one_of(VLLM_DTYPES), self.vllm_dtype)
        if self.sim_speedup <= 0:
            raise ConfigError("sim_speedup", "must be > 0", self.sim_speedup)
        if self.sim_load_s < 0:
            raise ConfigError("sim_load_s", "must be >= 0", self.sim_load_s)
        if self.devices < 0:
            raise ConfigError("devices", "must be >= 0", self.devices)
        if self.prewarm_ttl_s <= 0:
            raise ConfigError("prewarm_ttl_s", "must be > 0", self.prewarm_ttl_s)


SIMULATED_DEVICES = 8
"""Devices a sim or null worker accepts for tensor parallelism by default: a simulated 8-GPU node."""


def worker_devices(settings: Settings) -> int:
    """``settings.devices``, or for 0 the GPUs a vLLM worker sees (1 on a CPU) and a simulated node's 8."""
    if settings.devices:
        return settings.devices
    if settings.engine != "vllm":
        return SIMULATED_DEVICES
    import torch

    return max(1, torch.cuda.device_count())


def build_engine(settings: Settings, model: str, tensor_parallel_size: int = 1) -> EngineBackend:
    """An engine of the configured kind serving ``model`` over ``tensor_parallel_size`` devices (vLLM applies
    it; the sim and null engines run it as one, the worker reports it); heavy packages are imported only when
    chosen."""
    if settings.engine == "vllm":
        from forethought.backends.vllm.backend import (
            VllmEngineBackend,
            VllmEngineOptions,
        )

        scheduler_cls = None
        if settings.vllm_bros_scheduler:
            from forethought.backends.vllm.bros_scheduler import BrosVllmScheduler

            scheduler_cls = BrosVllmScheduler
        return VllmEngineBackend(VllmEngineOptions(
            model=model, kv_cache_gib=settings.vllm_kv_cache_gib, max_model_len=settings.vllm_max_model_len,
            dtype=settings.vllm_dtype, enable_lora=settings.vllm_enable_lora, scheduler_cls=scheduler_cls,
            tensor_parallel_size=tensor_parallel_size,
        ))
    if settings.engine == "null":
        from forethought.backends.null import NullEngineBackend

        return NullEngineBackend(model, num_blocks=settings.sim_kv_blocks)
    from forethought.backends.sim import SimEngineBackend
    from forethought.engine.core import EngineConfig

    return SimEngineBackend(
        model=model, config=EngineConfig(num_blocks=settings.sim_kv_blocks),
        profile=settings.sim_profile, speedup=settings.sim_speedup, load_s=settings.sim_load_s,
    )


class WorkerShell:
    grpc_service_name = "forethought.v1.WorkerService"

    def __init__(self, settings: Settings, lifecycle: ModelLifecycle | None = None) -> None:
        """``lifecycle``: engines already built by the caller; by default, engines of ``settings.engine``."""
        from forethought.prefix.published_blocks import PublishedBlocks
        from forethought.prefix.redis_index import RedisPrefixIndex

        self._settings = settings
        self._redis = connect_redis(settings.redis_url)
        self._registry = WorkerRegistry(self._redis, settings.namespace, ttl_s=settings.heartbeat_ttl_s)
        self._index = RedisPrefixIndex(self._redis, settings.namespace)
        self._published = PublishedBlocks()
        self._publishing = asyncio.Lock()
        lifecycle = lifecycle or ModelLifecycle(
            lambda model: build_engine(settings, model, self._servicer.tensor_parallel.get(model, 1)))
        tools = [ProcessPoolSandbox(), DockerContainerLauncher(settings.tool_container_image)]
        self._agent = PrewarmAgent(lifecycle, {tool.kind: tool for tool in tools}, ttl_s=settings.prewarm_ttl_s)
        self._servicer = WorkerServicer(self._agent, settings.model, worker_devices(settings))
        self._worker_id = settings.worker_id
        self._address = ""
        self._tasks: list[asyncio.Task[None]] = []
        self._state = "serving"
        self._metrics_key: int | None = None

    @property
    def _engine(self) -> EngineBackend:
        engine = self._agent.lifecycle.engine(self._settings.model)
        assert engine is not None  # NOTE: the primary model is loaded in start() and never unloaded
        return engine

    def register(self, server: grpc.aio.Server) -> None:
        worker_pb2_grpc.add_WorkerServiceServicer_to_server(self._servicer, server)

    async def start(self, address: str) -> None:
        self._address = self._settings.advertise_address or address
        self._worker_id = self._worker_id or f"{socket.gethostname()}-{address.rpartition(':')[2]}-{os.getpid()}"
        self._servicer.worker_id = self._worker_id
        await wait_for_redis(self._redis, self._settings.redis_url)
        taking_over = await self._refuse_a_live_namesake()
        load_s = await self._agent.lifecycle.load(self._settings.model)
        # Subscribe before the first request so no cache event is missed.
        events = self._engine.cache_events()
        await self._register(taking_over)
        self._metrics_key = WORKER_STATS.add(self._reading)
        self._tasks = [
            asyncio.create_task(self._heartbeats(), name="heartbeats"),
            asyncio.create_task(self._publish_cache_events(events), name="cache-event-publisher"),
            asyncio.create_task(self._expire_prewarms(), name="prewarm-expiry"),
        ]
        log.info("worker %s registered at %s (engine %s, model %s, loaded in %.1f s)", self._worker_id,
                 self._address, self._settings.engine, self._settings.model, load_s)

    async def _refuse_a_live_namesake(self) -> str:
        """Stops the start when a live worker elsewhere holds this id: both would rewrite one registry entry,
        the schedulers would dial each in turn, and the prefix index would merge their caches. An entry at
        another address whose heartbeat stands still until its TTL runs out is a dead worker's, and one at
        this address is this address's last run's: the token of its writer is returned, for ``_register``
        to take it over ('' when there is no entry)."""
        held = await self._registry.holding(self._worker_id)
        deadline = asyncio.get_running_loop().time() + 2 * self._settings.heartbeat_ttl_s  # bounds an entry without a TTL
        while (held is not None and held.record.address != self._address
               and asyncio.get_running_loop().time() < deadline):
            await asyncio.sleep(NAMESAKE_POLL_S)
            now = await self._registry.holding(self._worker_id)
            if now is not None and now.record.heartbeat_s != held.record.heartbeat_s:
                raise ConfigError("worker_id", f"must be an id no live worker holds: the worker at {now.record.address} "
                                  "heartbeats under it", self._worker_id)
            held = now
        return held.instance if held else ""

    async def _register(self, taking_over: str) -> None:
        """The first heartbeat, replacing only the entry the namesake check judged dead: a worker that
        registered under this id while this one loaded its model keeps it, and this start stops."""
        if not await self._registry.heartbeat(self._record(), taking_over):
            holder = await self._registry.entry(self._worker_id)
            who = f"the worker at {holder.address}" if holder else "another worker"
            raise ConfigError("worker_id", f"must be an id no live worker holds: {who} registered under it while "
                              "this one started", self._worker_id)
        await self._refresh_prefix_index()

    async def drain(self) -> None:
        self._state = "draining"
        if self._tasks:  # registered: say so to the schedulers; a start that failed never registered
            try:
                # bounded: a dead or frozen Redis must not hold the shutdown (the heartbeat's TTL retires us)
                await asyncio.wait_for(self._heartbeat(), self._settings.heartbeat_ttl_s)
            except Exception as error:
                log.warning("could not mark this worker draining in Redis (%r); the schedulers drop it when its "
                            "heartbeat expires", error)

    async def stop(self) -> None:
        if self._metrics_key is not None:
            WORKER_STATS.remove(self._metrics_key)
        await cancel_tasks(self._tasks)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._leave_registry(), self._settings.heartbeat_ttl_s)
        await self._agent.close()
        await self._agent.lifecycle.stop_all()
        await self._redis.aclose()

    def failure(self) -> str | None:
        engine = self._engine.failure()
        return f"its engine for {self._settings.model} failed: {engine}" if engine else ended_task(self._tasks)

    async def _leave_registry(self) -> None:
        # Not when another worker holds the id: one this worker's start was refused for, or one that took it over.
        if await self._registry.deregister(self._worker_id):
            await self._index.remove_worker(self._worker_id)

    def _record(self) -> WorkerRecord:
        return WorkerRecord(
            worker_id=self._worker_id, address=self._address, model=self._settings.model,
            engine=self._settings.engine, capacity=self._settings.capacity, state=self._state,
            load=self._engine.stats(),
        )

    def _reading(self) -> WorkerReading:
        lifecycle = self._agent.lifecycle
        engines = {model: engine.stats() for model in lifecycle.loaded() if (engine := lifecycle.engine(model)) is not None}
        return WorkerReading(self._worker_id, engines, {kind: self._agent.metrics(kind) for kind in PrewarmKind})

    async def _heartbeat(self) -> None:
        if not await self._registry.heartbeat(self._record()):
            raise WorkerIdTaken(f"another worker took the id {self._worker_id} while this one's registry entry had "
                                "lapsed (the process frozen past its TTL?); this one stops rather than share it")
        await self._refresh_prefix_index()

    async def _refresh_prefix_index(self) -> None:
        async with self._publishing:
            known = await self._index.refresh_worker(self._worker_id, self._settings.heartbeat_ttl_s)
            if not known and len(self._published):
                await self._index.republish(self._worker_id, self._published.block_hashes())
                REPUBLISHED_BLOCKS.inc(len(self._published))
                log.warning("the prefix index had lost this worker (Redis restarted or flushed?): re-published %d blocks",
                            len(self._published))

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self._settings.heartbeat_s)
            try:
                await self._heartbeat()
            except WorkerIdTaken:
                raise  # ends the task: the service reports the failure and exits
            except Exception:
                log.warning("heartbeat to Redis failed; retrying", exc_info=True)

    async def _publish_cache_events(self, events: AsyncIterator[Sequence[CacheEvent]]) -> None:
        async for batch in events:
            async with self._publishing:  # a re-publish sends the set as of a whole batch, never half of one
                self._published.apply(batch)
                try:
                    await self._index.apply(self._worker_id, batch)
                except Exception:
                    log.warning("writing %d cache events to Redis failed", len(batch), exc_info=True)

    async def _expire_prewarms(self) -> None:
        while True:
            await asyncio.sleep(min(5.0, self._settings.prewarm_ttl_s / 2))
            try:
                for entry in await self._agent.expire():
                    log.info("prewarmed %s %s expired unused", entry.kind.name.lower(), entry.key)
            except Exception:  # a release that failed (a tool's container, an engine's stop) is tried next round
                log.warning("releasing expired prewarms failed; retrying", exc_info=True)


class WorkerIdTaken(RuntimeError):
    """Another worker holds this worker's id now: this one's entry lapsed and was taken over."""


def build(settings: Settings) -> WorkerShell:
    return WorkerShell(settings)


SERVICE = ServiceSpec("worker", __doc__ or "", Settings, build)
