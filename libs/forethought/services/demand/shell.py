"""Demand: application demand graphs (Hermes PDGraph), estimates, Gittins ranks and prewarm decisions.

Applications are registered from their file's content and kept in Redis with every run they learn
from, so a restarted service serves them as they were; estimates are Monte Carlo walks over each graph
(``forethought.demand``) with token lengths turned into seconds by a cost profile; ``WatchPrewarm``
sends Eq. 3's decisions for the runs that report their step. docs/demand.md, "Service".
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass

import grpc

from forethought.cluster.redis_client import connect_redis, wait_for_redis
from forethought.cluster.registry import WorkerRegistry
from forethought.config import ConfigError, ServiceSettings, one_of, option
from forethought.costmodel import PROFILES, profile_names
from forethought.demand import EXPECTED_EFFECTIVENESS, WALKS, BackendKind, BackendSpec
from forethought.rpc.server import ServiceSpec, cancel_tasks, ended_task
from forethought.services.demand.applications import Applications
from forethought.services.demand.runs import RunBoard
from forethought.services.demand.seconds import CostModelSeconds
from forethought.services.demand.servicer import DemandServicer
from forethought.services.demand.store import ProfileStore
from forethought.v1 import demand_pb2_grpc

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings(ServiceSettings):
    port: int = option(50054, "gRPC port; 0 picks a free one")
    cost_profile: str = option("llama-7b-a100", "cost profile turning token lengths into seconds (docs/costmodel.md); "
                               "a unit whose model has a profile on the same hardware uses that one")
    walks: int = option(WALKS, "Monte Carlo walks per estimate")
    refine: bool = option(True, "online refinement by the upstream step (Hermes 3.2); off is the paper's ablation")
    prewarm_knob: float = option(EXPECTED_EFFECTIVENESS, "K of Eq. 3 when a watcher does not set one, in (0, 1]")
    warmup_model_s: float = option(20.0, "seconds to load a model, t_p of a model prewarm")
    warmup_lora_s: float = option(0.05, "seconds to load a LoRA adapter, t_p of an adapter prewarm")
    warmup_tool_s: float = option(1.0, "seconds to start a tool backend, t_p of a tool prewarm")
    warmup_prefix_s: float = option(0.4, "seconds to prefill a unit's prompt prefix, t_p of a KV-prefix prewarm "
                                         "(docs/prewarm.md measures 0.3-0.4 s for 226 tokens on vLLM CPU)")
    run_ttl_s: float = option(86_400.0, "seconds an unfinished run's steps (and its last report) are kept after the last one")
    registry_poll_s: float = option(2.0, "seconds between reads of the worker registry (models served are warm)")
    seed: int = option(-1, "seed of the Monte Carlo walks; -1 = a fresh one each start")

    def validate(self) -> None:
        super().validate()
        if self.cost_profile not in PROFILES:
            raise ConfigError("cost_profile", one_of(profile_names()), self.cost_profile)
        if self.walks < 1:
            raise ConfigError("walks", "must be >= 1", self.walks)
        if not 0 < self.prewarm_knob <= 1:
            raise ConfigError("prewarm_knob", "must be in (0, 1]", self.prewarm_knob)
        for name in ("warmup_model_s", "warmup_lora_s", "warmup_tool_s", "warmup_prefix_s"):
            if getattr(self, name) < 0:
                raise ConfigError(name, "must be >= 0", getattr(self, name))
        for name in ("run_ttl_s", "registry_poll_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(name, "must be > 0", getattr(self, name))

    def warmup_s(self, backend: BackendSpec) -> float:
        if backend.kind is BackendKind.TOOL:
            return self.warmup_tool_s
        if backend.lora_adapter:
            return self.warmup_lora_s
        return self.warmup_prefix_s if backend.prompt_prefix else self.warmup_model_s


class DemandShell:
    grpc_service_name = "forethought.v1.DemandService"

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._redis = connect_redis(settings.redis_url)
        self._registry = WorkerRegistry(self._redis, settings.namespace)
        self._served_models: frozenset[str] = frozenset()
        store = ProfileStore(self._redis, settings.namespace, settings.run_ttl_s)
        seconds = CostModelSeconds(PROFILES[settings.cost_profile], PROFILES)
        rng = random.Random(settings.seed if settings.seed >= 0 else None)
        self._board = RunBoard(settings.run_ttl_s)
        self._servicer = DemandServicer(
            Applications(store, seconds, settings.walks, settings.refine), store, self._board, rng,
            settings.prewarm_knob, settings.warmup_s, self._is_warm,
        )
        self._tasks: list[asyncio.Task[None]] = []

    def register(self, server: grpc.aio.Server) -> None:
        demand_pb2_grpc.add_DemandServiceServicer_to_server(self._servicer, server)

    async def start(self, address: str) -> None:
        await wait_for_redis(self._redis, self._settings.redis_url)
        self._tasks = [asyncio.create_task(self._read_registry(), name="registry-reader")]
        log.info("demand: cost profile %s, %d walks, K %.2f", self._settings.cost_profile, self._settings.walks,
                 self._settings.prewarm_knob)

    async def drain(self) -> None:
        self._board.close()  # prewarm streams end now instead of holding the stop for the whole grace

    async def stop(self) -> None:
        await cancel_tasks(self._tasks)
        await self._redis.aclose()

    def failure(self) -> str | None:
        return ended_task(self._tasks)

    def _is_warm(self, backend: BackendSpec) -> bool:
        """A model that a live worker serves as its own needs no prewarm; adapters, prompt prefixes and tools
        are not known warm."""
        return (backend.kind is BackendKind.LLM and not backend.lora_adapter and not backend.prompt_prefix
                and backend.model in self._served_models)

    async def _read_registry(self) -> None:
        while True:
            try:
                self._served_models = frozenset(record.model for record in await self._registry.workers())
            except Exception:
                log.warning("reading the worker registry failed; keeping the last known models", exc_info=True)
            await asyncio.sleep(self._settings.registry_poll_s)


def build(settings: Settings) -> DemandShell:
    return DemandShell(settings)


SERVICE = ServiceSpec("demand", __doc__ or "", Settings, build)
