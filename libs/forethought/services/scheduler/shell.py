"""Scheduler: the front door and the global queue (Preble section 4.1-4.2, SSJF, Hermes, BROS classes).

Workers come from the Redis registry (heartbeats with capacity and load); prompts are matched against
the shared Redis prefix index, so every replica sees what every worker caches; requests wait in a
per-model global queue ordered by ``--policy`` and are placed by ``--router`` (E2 by default) when a
worker has room. Application runs (Hermes) take their steps' ranks from the demand service, re-ranked
every ``--rank-refresh-s`` while they wait, and its prewarm decisions are sent to the workers. With
``--tenants-file`` every call needs a tenant's bearer token and ``Generate`` keeps the tenant's quotas
(docs/access.md). Replicas share Redis: each records the requests it holds there, so a ``Cancel`` sent
to another replica is forwarded to the holder (``owners``). The decisions are ``forethought.scheduling``;
this package does the I/O.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import grpc

from forethought.access import QuotaLedger, TenantBook, tenants_of
from forethought.cluster.redis_client import connect_redis, wait_for_redis
from forethought.cluster.registry import WorkerRecord, WorkerRegistry, with_recent_heartbeats
from forethought.config import ConfigError, ServiceSettings, one_of, option
from forethought.documents import read_document
from forethought.domain import InvalidField
from forethought.prefix.redis_index import RedisPrefixIndex
from forethought.queueing import POLICY_NAMES, FairQueue, GlobalQueue, build_policy
from forethought.routing import ROUTER_NAMES, build_router
from forethought.rpc.access import AccessInterceptor
from forethought.rpc.channels import channel_tls_of, open_channel
from forethought.rpc.server import ServiceSpec, cancel_tasks, ended_task
from forethought.scheduling import Dispatcher, WorkerSlots
from forethought.services.scheduler.applications import ApplicationRuns
from forethought.services.scheduler.forecasts import ForecastClient
from forethought.services.scheduler.owners import RequestOwners
from forethought.services.scheduler.placement import PlacementLoop
from forethought.services.scheduler.pool import WorkerPool
from forethought.services.scheduler.requests import PromptTokens
from forethought.services.scheduler.servicer import SchedulerServicer
from forethought.services.scheduler.shared_rates import SharedRates
from forethought.services.scheduler.tenancy import TenantGate
from forethought.v1 import demand_pb2_grpc, scheduler_pb2_grpc, tokenizer_pb2_grpc

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings(ServiceSettings):
    port: int = option(50051, "gRPC port; 0 picks a free one")
    tokenizer_address: str = option("", "tokenizer service host:port; empty = token-id prompts only")
    tokenizer_timeout_s: float = option(10.0, "seconds a tokenizer call may take")
    predictor_address: str = option("", "predictor service host:port; empty = no forecasts (FCFS order, degraded)")
    predictor_timeout_s: float = option(0.25, "seconds a forecast may take before the request goes on without one")
    demand_address: str = option("", "demand service host:port; empty = no application runs (FAILED_PRECONDITION)")
    demand_timeout_s: float = option(5.0, "seconds a demand-service call may take")
    rank_refresh_s: float = option(1.0, "seconds between re-rankings of the waiting steps of application runs (Hermes 3.3)")
    run_idle_ttl_s: float = option(3600.0, "seconds an application run may go without a step before it is abandoned (failed)")
    lora_root: str = option("", "folder on the workers holding LoRA adapters as <folder>/<adapter>; empty = adapters are not prewarmed")
    router: str = option("e2", f"placement policy: one of {', '.join(ROUTER_NAMES)} (docs/routing.md)")
    policy: str = option("ssjf", f"queue order: one of {', '.join(POLICY_NAMES)} (docs/queueing.md)")
    aging_rate: float = option(1.0, "queue aging per second waited (tokens/s for ssjf and gittins, s/s for lstf and rtbe)")
    max_queue: int = option(10_000, "requests that may wait per model; more are refused with RESOURCE_EXHAUSTED")
    max_queue_best_effort: int = option(0, "waiting requests per model beyond which best-effort ones are refused with "
                                           "RESOURCE_EXHAUSTED while real-time ones are admitted up to --max-queue "
                                           "(overload sheds BE first; with --fair-share only a tenant holding its "
                                           "equal share is refused); 0 = --max-queue")
    max_waiting_per_worker: int = option(4, "requests sent to a worker ahead of its first token; the rest wait here")
    resume_streams: bool = option(True, "resume a stream whose worker is lost mid-way on another worker, from the tokens "
                                        "already sent, when its decoding is greedy or seeded (docs/scheduler.md)")
    max_resumes: int = option(2, "resumes per stream after losing its worker mid-way")
    max_attempts: int = option(3, "dispatches per request: the first plus retries after losing a worker before its first token")
    block_size: int = option(16, "tokens per block of the prefix index: the size the workers index their caches in (16)")
    index_timeout_s: float = option(0.25, "seconds a prefix-index match may take before placement goes on by load alone")
    registry_poll_s: float = option(0.5, "seconds between reads of the worker registry")
    heartbeat_ttl_s: float = option(5.0, "a worker whose heartbeat is older than this is dead")
    sweep_interval_s: float = option(10.0, "seconds between sweeps of dead workers out of the prefix index")
    tenants_file: str = option("", "YAML or JSON file of tenants, their token hashes and quotas (docs/access.md); "
                                   "empty = open access, no tokens")
    fair_share: bool = option(False, "share each model's queue fairly between tenants (VTC: least-served tenant first, "
                                     "--policy within a tenant); needs --tenants-file")
    shared_quotas: bool = option(False, "keep tenants' requests/s and tokens/min in Redis, shared by every scheduler replica "
                                        "(open streams stay per replica); needs --tenants-file")

    def validate(self) -> None:
        super().validate()
        positive = ("tokenizer_timeout_s", "predictor_timeout_s", "index_timeout_s", "registry_poll_s", "heartbeat_ttl_s",
                    "sweep_interval_s", "demand_timeout_s", "rank_refresh_s", "run_idle_ttl_s")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(name, "must be > 0", getattr(self, name))
        if self.max_resumes < 0:
            raise ConfigError("max_resumes", "must be >= 0", self.max_resumes)
        if not 0 <= self.max_queue_best_effort <= self.max_queue:
            raise ConfigError("max_queue_best_effort", "must be between 0 and --max-queue", self.max_queue_best_effort)
        for name in ("max_queue", "max_waiting_per_worker", "max_attempts", "block_size"):
            if getattr(self, name) < 1:
                raise ConfigError(name, "must be >= 1", getattr(self, name))
        if self.router not in ROUTER_NAMES:
            raise ConfigError("router", one_of(ROUTER_NAMES), self.router)
        if self.policy not in POLICY_NAMES:
            raise ConfigError("policy", one_of(POLICY_NAMES), self.policy)
        if self.aging_rate < 0:
            raise ConfigError("aging_rate", "must be >= 0", self.aging_rate)
        if self.tenants_file:
            self.tenants()
        else:
            for name in ("fair_share", "shared_quotas"):
                if getattr(self, name):
                    raise ConfigError(name, "needs --tenants-file (without tenants there is no tenant to share by)", True)

    def tenants(self) -> TenantBook | None:
        """The tenants of ``--tenants-file``; None when it is unset (open access)."""
        if not self.tenants_file:
            return None
        try:
            return tenants_of(read_document(self.tenants_file))
        except (InvalidField, OSError) as error:
            raise ConfigError("tenants_file", str(error), self.tenants_file) from error


def dispatcher_factory(settings: Settings) -> Callable[[], Dispatcher]:
    """Builds one model's dispatcher from the settings (router and queue policy by name)."""

    def build() -> Dispatcher:
        queue_type = FairQueue if settings.fair_share else GlobalQueue
        queue = queue_type(build_policy(settings.policy, aging_rate=settings.aging_rate), settings.max_queue)
        return Dispatcher(build_router(settings.router), queue, WorkerSlots(settings.max_waiting_per_worker),
                          max_attempts=settings.max_attempts,
                          quarantine_s=settings.heartbeat_ttl_s + settings.registry_poll_s,
                          best_effort_limit=settings.max_queue_best_effort or None)

    return build


class SchedulerShell:
    grpc_service_name = "forethought.v1.SchedulerService"

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._redis = connect_redis(settings.redis_url)
        self._registry = WorkerRegistry(self._redis, settings.namespace, ttl_s=settings.heartbeat_ttl_s)
        self._index = RedisPrefixIndex(self._redis, settings.namespace)
        # Matches get a connection pool of their own without redis-py's per-command timeout (a task per
        # command): the placement loop bounds every match by --index-timeout-s itself.
        self._match_redis = connect_redis(settings.redis_url, command_timeout_s=None)
        self._match_index = RedisPrefixIndex(self._match_redis, settings.namespace)
        self._tenants = settings.tenants()
        tls = channel_tls_of(settings)  # TLS to every service it calls when set
        self._pool = WorkerPool(tls=tls)
        # Untraced, like the worker channels: the calls carry the trace context as metadata, and a client
        # interceptor on the per-chunk detokenizing stream costs a task per call and leaks it when the stream fails.
        self._tokenizer_channel = (open_channel(settings.tokenizer_address, traced=False, tls=tls)
                                   if settings.tokenizer_address else None)
        self._demand_channel = open_channel(settings.demand_address, tls=tls) if settings.demand_address else None
        self._tls = tls
        self._tasks: list[asyncio.Task[None]] = []
        self._told_block_size: set[str] = set()  # workers whose other block size was logged
        self.placement: PlacementLoop | None = None
        self._applications: ApplicationRuns | None = None
        self._prompt_tokens: PromptTokens | None = None
        self._forecasts: ForecastClient | None = None
        self._owners = RequestOwners(self._redis, settings.namespace)
        self._servicer: SchedulerServicer | None = None

    def register(self, server: grpc.aio.Server) -> None:
        tokenizer = tokenizer_pb2_grpc.TokenizerServiceStub(self._tokenizer_channel) if self._tokenizer_channel else None
        self.placement = PlacementLoop(dispatcher_factory(self._settings), self._match_index.match_many,
                                       index_timeout_s=self._settings.index_timeout_s)
        self._forecasts = ForecastClient(self._settings.predictor_address, self._settings.predictor_timeout_s,
                                         tls=self._tls)
        demand = demand_pb2_grpc.DemandServiceStub(self._demand_channel) if self._demand_channel else None
        self._applications = ApplicationRuns(demand, self.placement.revise_application, self._settings.demand_timeout_s,
                                             self._settings.run_idle_ttl_s)
        self._prompt_tokens = PromptTokens(tokenizer, self._settings.tokenizer_timeout_s)
        servicer = SchedulerServicer(
            self._pool, self._registry, self.placement, self._forecasts,
            self._prompt_tokens, self._applications,
            self._settings.block_size, self._settings.heartbeat_ttl_s, self._settings.resume_streams, self._settings.max_resumes,
            self._owners,
        )
        self._servicer = servicer
        shared = SharedRates(self._redis, self._settings.namespace) if self._settings.shared_quotas else None
        gated = (servicer if self._tenants is None
                 else TenantGate(servicer, self._tenants, QuotaLedger(time.monotonic), shared))
        scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(gated, server)

    def interceptors(self) -> list[grpc.aio.ServerInterceptor]:
        """Bearer-token authentication of every SchedulerService call when a tenants file is set."""
        return [] if self._tenants is None else [AccessInterceptor(self._tenants, self.grpc_service_name)]

    async def start(self, address: str) -> None:
        assert self.placement is not None  # NOTE: register() runs before start()
        await wait_for_redis(self._redis, self._settings.redis_url)
        await self._refresh_workers()
        self._tasks = [
            asyncio.create_task(self.placement.run(), name="placement-loop"),
            asyncio.create_task(self._every(self._settings.registry_poll_s, self._refresh_workers, "reading the worker registry")),
            asyncio.create_task(self._every(self._settings.sweep_interval_s, self._sweep, "sweeping the prefix index")),
            asyncio.create_task(self._every(self._owners.flush_interval_s, self._owners.flush, "writing request owner records")),
            asyncio.create_task(self._every(10.0, self._owners.refresh, "renewing the records of the requests held here")),
            asyncio.create_task(self._every(1.0, self._serve_cancels, "answering cancels forwarded by other replicas")),
        ]
        if self._demand_channel is not None:
            self._tasks += [
                asyncio.create_task(self._every(self._settings.rank_refresh_s, self._refresh_ranks, "re-ranking application steps")),
                asyncio.create_task(self._every(1.0, self._follow_prewarms, "following the demand service's prewarm decisions")),
            ]
        log.info("scheduler: router %s, policy %s, %d waiting per worker, queue %d",
                 self._settings.router, self._settings.policy, self._settings.max_waiting_per_worker, self._settings.max_queue)

    async def drain(self) -> None:
        return None

    def failure(self) -> str | None:
        return ended_task(self._tasks)  # the placement loop above all: without it no request is ever placed

    async def stop(self) -> None:
        await cancel_tasks(self._tasks)
        await self._pool.close()
        if self._forecasts is not None:
            await self._forecasts.close()
        if self._tokenizer_channel is not None:
            await self._tokenizer_channel.close()
        if self._demand_channel is not None:
            await self._demand_channel.close()
        await self._redis.aclose()
        await self._match_redis.aclose()

    async def _refresh_workers(self) -> None:
        assert self.placement is not None
        records = with_recent_heartbeats(self._pool.records, await self._registry.workers(), time.time(),
                                         self._settings.heartbeat_ttl_s)
        given_up = await self._pool.refresh(records)
        self.placement.sync(records)
        self.placement.forget_workers(given_up)
        self._tell_other_block_sizes(records)

    def _tell_other_block_sizes(self, records: Sequence[WorkerRecord]) -> None:
        """A worker whose cache is indexed in blocks of another size than the prompts are hashed in never
        matches a prefix; placement goes on by load alone, so say it once per worker, loudly."""
        for record in records:
            if record.load.block_size != self._settings.block_size and record.worker_id not in self._told_block_size:
                self._told_block_size.add(record.worker_id)
                log.error("worker %s indexes its cache in blocks of %d tokens, and this scheduler hashes prompts in "
                          "blocks of %d (--block-size): no prefix cached there can match; give both one size",
                          record.worker_id, record.load.block_size, self._settings.block_size)

    async def _refresh_ranks(self) -> None:
        assert self._applications is not None
        await self._applications.refresh_ranks()
        await self._applications.expire_idle()

    async def _follow_prewarms(self) -> None:
        """Sends prewarm decisions until the stream ends; the caller reconnects a second later."""
        assert self._applications is not None
        assert self._prompt_tokens is not None
        await self._applications.prewarm_from_decisions(self._pool, self._settings.lora_root, self._prompt_tokens.of_text)

    async def _serve_cancels(self) -> None:
        """Answers forwarded cancels until Redis fails; the caller subscribes again a second later."""
        assert self._servicer is not None
        await self._owners.serve_cancels(self._servicer.cancel_held)

    async def _sweep(self) -> None:
        dead = await self._index.sweep_dead_workers()
        if dead:
            log.info("swept dead workers out of the prefix index: %s", ", ".join(dead))

    @staticmethod
    async def _every(interval_s: float, job: Callable[[], Awaitable[None]], what: str) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await job()
            except Exception:
                log.warning("%s failed; keeping the last known state", what, exc_info=True)


def build(settings: Settings) -> SchedulerShell:
    return SchedulerShell(settings)


SERVICE = ServiceSpec("scheduler", __doc__ or "", Settings, build, interceptors=SchedulerShell.interceptors)
