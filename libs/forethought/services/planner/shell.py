"""Planner: offline multi-LLM batch jobs (SamuLLM) planned by sampling and simulation.

``Plan`` takes a job (models with their shapes and output-length sources, requests, edges, devices) and
answers Algorithm 1's execution stages beside the Max- and Min-heuristics' estimates and the search time;
the search runs in a worker thread. The planned job is kept in Redis; ``Run`` runs it on the workers of
the registry and ``Status`` streams its progress. docs/planner.md, "Service and CLI" and "Running a plan".
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc

from forethought.cluster.redis_client import connect_redis, wait_for_redis
from forethought.cluster.registry import WorkerRegistry
from forethought.config import ConfigError, ServiceSettings, option
from forethought.planner import OutputLengthCDF, load_castillo
from forethought.planner.lengths import castillo_path
from forethought.rpc.channels import channel_tls_of
from forethought.rpc.errors import FailedPrecondition
from forethought.rpc.server import ServiceSpec, cancel_tasks, ended_task
from forethought.services.planner.job_store import JobStore
from forethought.services.planner.servicer import PlannerServicer
from forethought.v1 import planner_pb2_grpc


@dataclass(frozen=True)
class Settings(ServiceSettings):
    port: int = option(50055, "gRPC port; 0 picks a free one")
    plan_timeout_s: float = option(300.0, "longest a Plan's search may take before it answers DEADLINE_EXCEEDED")
    max_concurrent_plans: int = option(1, "searches run at once (each takes one core); the others wait")
    data_dir: str = option("", "folder holding castillo/ for jobs that name CASTILLO models; empty = the default data directory")

    def validate(self) -> None:
        super().validate()
        if self.plan_timeout_s <= 0:
            raise ConfigError("plan_timeout_s", "must be > 0", self.plan_timeout_s)
        if self.max_concurrent_plans < 1:
            raise ConfigError("max_concurrent_plans", "must be >= 1", self.max_concurrent_plans)


def castillo_loader(data_dir: str) -> Callable[[], Mapping[str, OutputLengthCDF]]:
    """Reads the CASTILLO eCDFs on first use (about a second) and keeps them; FAILED_PRECONDITION when the
    file is absent."""
    path = castillo_path(Path(data_dir).expanduser() if data_dir else None)

    @functools.cache
    def load() -> Mapping[str, OutputLengthCDF]:
        if not path.is_file():
            raise FailedPrecondition(f"the planner has no CASTILLO data at {path}: send observed output lengths, "
                                     "or start it with --data-dir naming a folder that holds castillo/")
        return load_castillo(path)

    return load


class PlannerShell:
    """The servicer with its Redis client: planned jobs and the worker registry live there."""

    grpc_service_name = "forethought.v1.PlannerService"

    def __init__(self, settings: Settings) -> None:
        self._redis = connect_redis(settings.redis_url)
        self._redis_url = settings.redis_url
        self._tasks: list[asyncio.Task[None]] = []
        self.servicer = PlannerServicer(castillo_loader(settings.data_dir), settings.plan_timeout_s,
                                        JobStore(self._redis, settings.namespace),
                                        WorkerRegistry(self._redis, settings.namespace), settings.max_concurrent_plans,
                                        channel_tls_of(settings))

    def register(self, server: grpc.aio.Server) -> None:
        planner_pb2_grpc.add_PlannerServiceServicer_to_server(self.servicer, server)

    async def start(self, address: str) -> None:
        await wait_for_redis(self._redis, self._redis_url)
        self._tasks = [asyncio.create_task(self.servicer.keep_leases(), name="job-leases")]

    async def drain(self) -> None:
        return None

    async def stop(self) -> None:
        await cancel_tasks(self._tasks)
        await self.servicer.close()
        await self._redis.aclose()

    def failure(self) -> str | None:
        return ended_task(self._tasks)  # a job's runner failing fails that job only


def build(settings: Settings) -> PlannerShell:
    return PlannerShell(settings)


SERVICE = ServiceSpec("planner", __doc__ or "", Settings, build)
