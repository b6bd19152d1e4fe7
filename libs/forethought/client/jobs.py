"""``AsyncJobClient`` and ``JobClient``: the planner's API (SamuLLM batch jobs) as typed Python calls.

A job file (docs/planner.md) is planned into stages, run on the mesh's workers, and followed as it goes;
a job's state is kept in Redis, so ``run`` of a job planned before resumes it without redoing finished
requests. Channels, tokens and TLS are as ``AsyncForethoughtClient``'s (docs/client.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from forethought.client.blocking import BlockingClient, blocking, blocking_stream
from forethought.client.connection import ChannelClient, client_channel
from forethought.client.results import ClientError
from forethought.domain import InvalidField
from forethought.planner.job_file import JobFile, load_job_file
from forethought.rpc.access import bearer_metadata
from forethought.rpc.errors import retry_delay_of
from forethought.services.planner.servicer import job_to_proto
from forethought.telemetry.tracing import trace_metadata
from forethought.v1 import planner_pb2, planner_pb2_grpc

FOLLOW_RETRY_S = 1.0  # the wait before following a job again when the planner gave no retry hint

STATES = {planner_pb2.JOB_STATE_PLANNED: "PLANNED", planner_pb2.JOB_STATE_RUNNING: "RUNNING",
          planner_pb2.JOB_STATE_DONE: "DONE", planner_pb2.JOB_STATE_FAILED: "FAILED"}


@dataclass(frozen=True)
class JobPlan:
    """A planned job: its id, its stages, and the plan's estimate."""

    job_id: str
    stages: int
    requests: int
    estimated_makespan_s: float
    search_s: float


@dataclass(frozen=True)
class StageTime:
    stage: int  # 1-based
    estimated_s: float
    actual_s: float


@dataclass(frozen=True)
class JobProgress:
    """One reading of a running job: its state (PLANNED, RUNNING, DONE or FAILED), requests finished,
    the stage it is in, the plan's estimate of what is left, each stage's time so far, and its error."""

    job_id: str
    state: str
    finished_requests: int
    total_requests: int
    elapsed_s: float
    estimated_remaining_s: float
    stage: int
    stage_count: int
    running: tuple[str, ...]  # "<model> <replicas>x<gpus>" loaded on workers now
    stage_times: tuple[StageTime, ...]
    error: str
    job_name: str = ""  # the planned job's name

    @property
    def finished(self) -> bool:
        return self.state in ("DONE", "FAILED")

    @classmethod
    def of(cls, reply: planner_pb2.StatusResponse) -> JobProgress:
        return cls(
            reply.job_id, STATES.get(reply.state, "UNKNOWN"), reply.finished_requests, reply.total_requests,
            reply.elapsed_s, reply.estimated_remaining_s, reply.stage, reply.stage_count,
            tuple(f"{placed.model} {placed.replicas}x{placed.gpus}" for placed in reply.running),
            tuple(StageTime(row.stage, row.estimated_s, row.actual_s) for row in reply.stage_times), reply.error,
            reply.job_name,
        )


def require_the_same_job(earlier: JobProgress | None, job_id: str, job_name: str) -> None:
    """Raises InvalidField naming ``job_id`` when it holds a job planned from another file: following it would
    run that job and ignore the file given."""
    if earlier is not None and earlier.job_name and earlier.job_name != job_name:
        raise InvalidField("job_id", f"{job_id!r} holds job {earlier.job_name!r}, not {job_name!r}: give that job's file "
                                     "to follow it, or another id to plan this one")


class AsyncJobClient(ChannelClient):
    """The planner's API for asyncio code; ``async with AsyncJobClient(address) as jobs``.

    Args:
        address: the planner's host:port.
        timeout_s: the deadline of ``plan`` and ``run`` calls (a search may take minutes); None: none.
        token, root_certs, client_cert: as ``AsyncForethoughtClient``'s.
    """

    def __init__(self, address: str, *, timeout_s: float | None = 600.0, token: str | None = None,
                 root_certs: bytes | None = None, client_cert: tuple[bytes, bytes] | None = None) -> None:
        super().__init__(client_channel(address, root_certs, client_cert))
        self._credential = bearer_metadata(token)
        self._stub = planner_pb2_grpc.PlannerServiceStub(self._channel)
        self._timeout_s = timeout_s

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        return (*trace_metadata(), *self._credential)

    async def plan(self, job: str | Path | JobFile, *, job_id: str = "", preemption: bool = True,
                   cost_profiles: Sequence[str] = ()) -> JobPlan:
        """Plans a job file (a path or a loaded ``JobFile``) under ``job_id`` (empty: the planner picks one),
        with the calibrated ``cost_profiles`` (names or paths on the planner's host) for the models they fit.

        Raises:
            forethought.domain.InvalidField: the file breaks a rule (nothing was sent).
            ClientError: the planner refused it (a cycle, a model no device can hold, an id taken).
        """
        job_file = job if isinstance(job, JobFile) else load_job_file(job)
        reply = await self._call(self._stub.Plan(planner_pb2.PlanRequest(
            job_id=job_id, job=job_to_proto(job_file), seed=job_file.seed, no_preemption=not preemption,
            skip_baselines=True, cost_profiles=list(cost_profiles)), timeout=self._timeout_s, metadata=self._metadata()))
        return JobPlan(reply.job_id, len(reply.stages), reply.requests, reply.estimated_makespan_s, reply.search_s)

    async def run(self, job_id: str, *, max_tokens: int = 0, max_prompt_tokens: int = 0, replan: bool = False) -> JobProgress:
        """Starts (or resumes) a planned job on the workers; returns its first reading."""
        await self._call(self._stub.Run(planner_pb2.RunRequest(
            job_id=job_id, max_tokens=max_tokens, max_prompt_tokens=max_prompt_tokens, replan=replan),
            timeout=self._timeout_s, metadata=self._metadata()))
        async for progress in self.status(job_id):
            return progress
        raise ClientError(grpc.StatusCode.UNAVAILABLE, f"the planner sent no status of job {job_id}")

    async def status(self, job_id: str, *, interval_s: float = 0.5, outage_s: float = 60.0) -> AsyncIterator[JobProgress]:
        """Streams the job's progress every ``interval_s`` until it is DONE or FAILED.

        The planner or its Redis out (UNAVAILABLE) for at most ``outage_s`` is waited out: the job goes on
        meanwhile, so the stream is opened again after the server's retry hint (else 1 s) and the readings go
        on. Past ``outage_s``, or on any other status, ``ClientError``."""
        out_since: float | None = None
        while True:
            call = self._stub.Status(planner_pb2.StatusRequest(job_id=job_id, interval_s=interval_s),
                                     metadata=self._metadata())
            try:
                async for reply in call:
                    out_since = None
                    yield JobProgress.of(reply)
                return
            except grpc.aio.AioRpcError as error:
                now = time.monotonic()
                out_since = now if out_since is None else out_since
                if error.code() != grpc.StatusCode.UNAVAILABLE or now - out_since >= outage_s:
                    raise ClientError.of(error) from error
                wait_s = retry_delay_of(error) or FOLLOW_RETRY_S
            finally:
                call.cancel()
            await asyncio.sleep(wait_s)

    async def run_file(self, job: str | Path | JobFile, *, job_id: str = "", max_tokens: int = 0, max_prompt_tokens: int = 0,
                       replan: bool = False) -> JobProgress:
        """Plans the job (unless ``job_id`` names one planned before), runs it and waits for its end;
        returns its last reading."""
        job_file = job if isinstance(job, JobFile) else load_job_file(job)
        earlier = await self.planned(job_id) if job_id else None
        require_the_same_job(earlier, job_id, job_file.name)
        if earlier is None:
            job_id = (await self.plan(job_file, job_id=job_id)).job_id
        last = await self.run(job_id, max_tokens=max_tokens, max_prompt_tokens=max_prompt_tokens, replan=replan)
        async for progress in self.status(job_id):
            last = progress
        return last

    async def planned(self, job_id: str) -> JobProgress | None:
        """The job of this id as planned before (its state is kept); None when none was."""
        try:
            async for progress in self.status(job_id, outage_s=0.0):  # a planner that is out says so at once
                return progress
        except ClientError as error:
            if error.code == grpc.StatusCode.NOT_FOUND:
                return None
            raise
        return None

    @staticmethod
    async def _call(call: Any) -> Any:
        try:
            return await call
        except grpc.aio.AioRpcError as error:
            raise ClientError.of(error) from error


class JobClient(BlockingClient):
    """The planner's API for blocking code (arguments as ``AsyncJobClient``); ``with JobClient(address) as jobs``."""

    def __init__(self, address: str, *, timeout_s: float | None = 600.0, token: str | None = None,
                 root_certs: bytes | None = None, client_cert: tuple[bytes, bytes] | None = None) -> None:
        super().__init__(lambda: AsyncJobClient(address, timeout_s=timeout_s, token=token, root_certs=root_certs,
                                                client_cert=client_cert))

    plan = blocking(AsyncJobClient.plan)
    run = blocking(AsyncJobClient.run)
    run_file = blocking(AsyncJobClient.run_file)
    status = blocking_stream(AsyncJobClient.status)
