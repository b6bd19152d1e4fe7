"""Runs one planned job on the registered workers: the imperative shell around ``planner.running.JobRun``.

Each turn asks the run which models to place, stops the ones it drops (their requests in flight and
their loads under way are cancelled, the requests redone later: SamuLLM's preemption), and starts the
ones it places on ``dp`` workers, each replica its own ``LoadModel`` task: the loads of a stage overlap.
Ready requests go, up to each worker's registered capacity in flight, to the least busy loaded replica of
their model with the worker's ``Generate`` (``model`` set: the scheduler routes by a worker's primary model
only, so a model loaded for the job is reached directly): a model's requests start with its first loaded
replica, and the loop waits on request and load completions together, so a slow load holds only its own
model. A finished request's output tokens are written to the job store before the run counts it, and
become the prompt tail of the requests that take it as input.

A replica is one worker, loaded with the plan's ``tp`` (``LoadModelRequest.tensor_parallel_size``): vLLM
splits the model over that many of the worker's GPUs; a worker with fewer devices refuses, naming the field.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc
from redis.exceptions import RedisError

from forethought.cluster.redis_client import REDIS_UNREACHABLE
from forethought.cluster.registry import WorkerRecord, WorkerRegistry
from forethought.domain import InvalidField
from forethought.planner.job import JobRequest
from forethought.planner.running import (
    JobRun,
    Placement,
    StalledRun,
    assign_replicas,
    max_tokens_of,
    prompt_token_ids,
)
from forethought.rpc.channels import ChannelTls, open_channel
from forethought.services.planner.job_store import JobStore, RunRecord, StoredJob
from forethought.telemetry.tracing import trace_metadata
from forethought.v1 import worker_pb2, worker_pb2_grpc

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3  # dispatches of one request before the job fails
STORE_RETRY_MAX_WAIT_S = 5.0  # the longest pause between tries of a store call
STORE_OUTAGE_MAX_S = 60.0
"""How long a running job waits out Redis down or not answering (a restart, a failover) before it fails."""

T = TypeVar("T")


@dataclass(frozen=True)
class ReplicaLoad:
    """One replica's ``LoadModel`` under way: the model, its tensor-parallel degree and the worker asked."""

    model: str
    tp: int
    worker_id: str


class JobRunner:
    """Runs ``run`` to its end, writing its progress to ``store`` under the job's id."""

    def __init__(self, store: JobStore, registry: WorkerRegistry, stored: StoredJob, run: JobRun, record: RunRecord,
                 outputs: dict[str, list[int]], replan: Callable[[JobRun], JobRun] | None = None,
                 tls: ChannelTls | None = None, clock: Callable[[], float] = time.time) -> None:
        """``replan``: searches the stages left again when the run deviates from its plan (None: only the
        next stage is adjusted); ``tls``: how the workers are called (None: plaintext)."""
        self._store = store
        self._registry = registry
        self._stored = stored
        self._job_id = stored.job_id
        self._replan = replan
        self._tls = tls
        self._run = run
        self._record = record
        self._outputs = outputs
        self._clock = clock
        self._workers: dict[str, tuple[str, ...]] = {name: tuple(found) for name, found in record.workers.items()}
        self._records: dict[str, WorkerRecord] = {}
        self._lost: set[str] = set()  # workers that answered UNAVAILABLE: gone, though the registry may list them a while
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._in_flight: dict[str, asyncio.Task[tuple[list[int], int]]] = {}
        self._loads: dict[asyncio.Task[worker_pb2.LoadModelResponse], ReplicaLoad] = {}
        self._spares: dict[str, list[str]] = {}  # per model: workers to try next when a replica's load fails
        self._refusals: dict[str, list[str]] = {}
        self._on_worker: dict[str, str] = {}
        self._failures: dict[str, int] = {}

    async def run(self) -> None:
        try:
            await self._loop()
            self._record.state = "done"
        except InvalidField as error:
            self._fail(f"{error.field}: {error.rule}")
        except StalledRun as error:
            self._fail(str(error))
        except Exception as error:  # a broken store or worker answer fails the job instead of leaving it running
            log.exception("job %s failed", self._job_id)
            self._fail(f"internal: {error}")
        finally:
            tasks = [*self._in_flight.values(), *self._loads]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for channel in self._channels.values():
                await channel.close()
        self._record.take(self._run, self._workers)
        await self._save_end()
        log.info("job %s %s", self._job_id, self._record.state if not self._record.error else self._record.error)

    async def _save_end(self) -> None:
        """Writes the run's end, asking again while the store fails in any way: otherwise the job would read
        "running" until a later ``Run``. A stop during the tries leaves it so, and that ``Run`` resumes it."""
        await self._through_store(lambda: self._store.save(self._job_id, self._record),
                                  f"saving its end ({self._record.state})", RedisError, None)

    async def _store_call(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        """A store call of the running job, waiting out Redis down or not answering for ``STORE_OUTAGE_MAX_S``
        while the workers go on with the requests they hold; a refusal (an error reply) fails the job."""
        return await self._through_store(call, what, REDIS_UNREACHABLE, STORE_OUTAGE_MAX_S)

    async def _through_store(self, call: Callable[[], Awaitable[T]], what: str,
                             passing: type[RedisError] | tuple[type[RedisError], ...], give_up_s: float | None) -> T:
        """Runs ``call``, trying it again after the ``passing`` errors, every 0.1 s doubling up to 5 s, each try
        logged, until ``give_up_s`` has passed (None: until it succeeds)."""
        started = time.monotonic()
        wait_s = 0.1
        while True:
            try:
                return await call()
            except passing as error:
                if give_up_s is not None and time.monotonic() - started >= give_up_s:
                    raise
                log.warning("job %s: %s: Redis failed (%s); trying again in %.1f s", self._job_id, what, error, wait_s)
            await asyncio.sleep(wait_s)
            wait_s = min(2 * wait_s, STORE_RETRY_MAX_WAIT_S)

    def _fail(self, error: str) -> None:
        self._record.state, self._record.error = "failed", error

    async def _loop(self) -> None:
        # A resumed run finds its models placed: load them again (a no-op where still loaded).
        first = Placement(tuple(self._run.running.items()), ()) if self._run.is_started else None
        while True:
            if self._replan is not None and self._run.deviates():
                self._run = await asyncio.to_thread(self._replan, self._run)
                await self._store_call(lambda: self._store.save_stages(self._stored, self._run.stages), "saving its stages")
                log.info("job %s: models finished out of plan; %d stages searched again", self._job_id,
                         len(self._run.stages) - self._run.pointer - 1)
            self._run, placement = self._run.schedule(self._clock())
            await self._apply(placement if first is None else Placement(first.start + placement.start, placement.stop))
            first = None
            self._record.take(self._run, self._workers)
            await self._store_call(lambda: self._store.save(self._job_id, self._record), "saving its progress")
            if self._run.is_done:
                return
            for request in self._run.ready_requests(frozenset(self._in_flight)):
                if self._workers.get(request.model):  # a model still loading waits for its first replica
                    self._dispatch(request)
            if not self._in_flight and not self._loads:
                raise StalledRun(f"no request of the running models is ready ({', '.join(self._run.running)})")
            finished, _ = await asyncio.wait([*self._in_flight.values(), *self._loads],
                                             return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                if task in self._loads:
                    self._settle_load(task)
                elif self._in_flight.get(task.get_name()) is task:
                    await self._settle(task)

    async def _apply(self, placement: Placement) -> None:
        registered = await self._store_call(self._registry.workers, "reading the worker registry")
        records = {record.worker_id: record for record in registered
                   if record.state == "serving" and record.worker_id not in self._lost}
        self._records.update(records)
        for name in placement.stop:
            await self._stop(name)
        if not placement.start:
            return
        live = sorted(records)
        chosen = assign_replicas(self._run.running, live, self._placed())
        for name, plan in dict(placement.start).items():
            self._start(name, plan.tp, chosen[name], live)

    def _placed(self) -> dict[str, tuple[str, ...]]:
        """The workers each model is loaded on or loading on."""
        placed = {name: list(found) for name, found in self._workers.items()}
        for load in self._loads.values():
            placed.setdefault(load.model, []).append(load.worker_id)
        return {name: tuple(found) for name, found in placed.items()}

    def _start(self, name: str, tp: int, chosen: tuple[str, ...], live: list[str]) -> None:
        """Starts loading ``name`` over ``tp`` devices on the chosen workers (the other ``live`` ones stand by
        for a refusal); a worker joins the model's replicas when its ``LoadModel`` answers (at once where the
        model is loaded already)."""
        loading = {load.worker_id for load in self._loads_of(name).values()}
        self._workers.pop(name, None)
        self._spares[name] = [worker for worker in live if worker not in chosen and worker not in loading]
        self._refusals.setdefault(name, [])
        for worker_id in chosen:
            if worker_id not in loading:
                self._start_load(ReplicaLoad(name, tp, worker_id))
        if not chosen and not loading:
            self._refuse(name)

    def _loads_of(self, name: str) -> dict[asyncio.Task[worker_pb2.LoadModelResponse], ReplicaLoad]:
        """The loads of ``name`` under way."""
        return {task: load for task, load in self._loads.items() if load.model == name}

    def _start_load(self, load: ReplicaLoad) -> None:
        self._loads[asyncio.create_task(self._load(load), name=f"load {load.model} on {load.worker_id}")] = load

    async def _load(self, load: ReplicaLoad) -> worker_pb2.LoadModelResponse:
        request = worker_pb2.LoadModelRequest(model=load.model, tensor_parallel_size=load.tp)
        return await self._stub(self._records[load.worker_id]).LoadModel(request, timeout=600, metadata=trace_metadata())

    def _settle_load(self, task: asyncio.Task[worker_pb2.LoadModelResponse]) -> None:
        """Adds the loaded replica to its model, or tries the model's next worker after a refusal."""
        load = self._loads.pop(task)
        try:
            reply = task.result()
        except grpc.RpcError as error:
            self._refusals[load.model].append(f"{load.worker_id}: {error.code().name} {error.details()}")
            spares = self._spares[load.model]
            if spares:
                self._start_load(ReplicaLoad(load.model, load.tp, spares.pop(0)))
            elif not self._workers.get(load.model) and not self._loads_of(load.model):
                self._refuse(load.model)
            return
        log.info("job %s: %s loaded on %s (tensor parallel %d) in %.2f s", self._job_id, load.model, load.worker_id,
                 reply.tensor_parallel_size, reply.load_s)
        self._workers[load.model] = (*self._workers.get(load.model, ()), load.worker_id)

    def _refuse(self, name: str) -> None:
        refusals = "; ".join(self._refusals.get(name, ())) or "no live worker"
        raise InvalidField(f"job.models[{name}]", f"no worker could load it ({refusals})")

    async def _stop(self, name: str) -> None:
        for request_id, task in list(self._in_flight.items()):
            if self._run.job.request_by_id[request_id].model == name:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                self._in_flight.pop(request_id)
                self._on_worker.pop(request_id)
        loads = list(self._loads_of(name))
        for task in loads:
            task.cancel()
        await asyncio.gather(*loads, return_exceptions=True)
        # A worker asked to load the model is asked to unload it too: its load may have answered meanwhile.
        cancelled = [self._loads.pop(task).worker_id for task in loads]
        if cancelled:
            log.info("job %s: %s stopped while loading on %s", self._job_id, name, ", ".join(cancelled))
        self._spares.pop(name, None)
        self._refusals.pop(name, None)
        for worker_id in (*self._workers.pop(name, ()), *cancelled):
            record = self._records.get(worker_id)
            if record is None or record.model == name:  # a worker's primary model stays
                continue
            with contextlib.suppress(grpc.RpcError):
                await self._stub(record).UnloadModel(worker_pb2.UnloadModelRequest(model=name), timeout=60,
                                                     metadata=trace_metadata())

    def _dispatch(self, request: JobRequest) -> None:
        """Sends the request to its model's least busy replica, unless each holds its worker's capacity."""
        busy = {worker: 0 for worker in self._workers[request.model]}
        for worker in self._on_worker.values():
            if worker in busy:
                busy[worker] += 1
        worker_id = min(busy, key=lambda w: busy[w])
        record = self._records[worker_id]
        if busy[worker_id] >= record.capacity:
            return
        self._on_worker[request.request_id] = worker_id
        self._in_flight[request.request_id] = asyncio.create_task(self._generate(request, record), name=request.request_id)

    async def _generate(self, request: JobRequest, record: WorkerRecord) -> tuple[list[int], int]:
        """The request's output tokens and the prompt length its worker reported."""
        attempt = await self._store_call(lambda: self._store.count_dispatch(self._job_id, request.request_id),
                                         f"counting a dispatch of {request.request_id}")
        message = worker_pb2.WorkerServiceGenerateRequest(
            request_id=f"{self._job_id}:{request.request_id}:{attempt}", model=request.model,
            prompt_token_ids=prompt_token_ids(request, self._outputs, self._record.max_prompt_tokens),
            max_tokens=max_tokens_of(self._run.job, request, self._record.max_tokens),
        )
        tokens: list[int] = []
        prompt = 0
        async for chunk in self._stub(record).Generate(message, metadata=trace_metadata()):
            tokens.extend(chunk.token_ids)
            prompt = chunk.usage.prompt_tokens or prompt
        return tokens, prompt

    async def _settle(self, task: asyncio.Task[tuple[list[int], int]]) -> None:
        request_id = task.get_name()
        self._in_flight.pop(request_id)
        worker_id = self._on_worker.pop(request_id)
        try:
            tokens, prompt = task.result()
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.UNAVAILABLE:
                self._lost.add(worker_id)
            self._failures[request_id] = self._failures.get(request_id, 0) + 1
            index = self._run.job.requests.index(self._run.job.request_by_id[request_id])
            if self._failures[request_id] >= MAX_ATTEMPTS:
                raise InvalidField(f"job.requests[{index}]", f"failed {MAX_ATTEMPTS} times; last: "
                                   f"{error.code().name} {error.details()}") from error
            log.warning("job %s: %s failed (%s); sending it again", self._job_id, request_id, error.details())
            # Replicas on workers that left the registry move to live ones before the request goes again.
            await self._apply(Placement(tuple(self._run.running.items()), ()))
            return
        await self._store_call(lambda: self._store.finish_request(self._job_id, request_id, tokens, prompt),
                               f"saving the output of {request_id}")
        self._outputs[request_id] = tokens
        self._run = self._run.with_finished(request_id, self._clock())

    def _stub(self, record: WorkerRecord) -> worker_pb2_grpc.WorkerServiceStub:
        channel = self._channels.get(record.address)
        if channel is None:
            # Untraced: a client interceptor's unary call ignores the caller's cancel, so a stopped load
            # would run on at the worker; the calls carry the trace context themselves.
            channel = self._channels[record.address] = open_channel(record.address, traced=False, tls=self._tls)
        return worker_pb2_grpc.WorkerServiceStub(channel)
