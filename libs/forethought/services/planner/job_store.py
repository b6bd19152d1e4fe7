"""Planned and running jobs in Redis, so a job survives a planner restart.

Per job, under ``<namespace>:planner:job:<id>``: a hash with the ``PlanJob`` and ``PlanResponse`` as
sent and answered (its stages replaced when a run searches the stages left again), its seed, whether it
was planned with preemption, and the run record (JSON: state, stage pointer, models placed with their plans
and workers, stage start times, the run's options, the error of a failed run); ``...:outputs``, a hash of
each finished request's output token ids and the prompt length its worker reported, written when the
request finishes (what a resumed run skips and forwards); ``...:sent``, a hash counting each request's
dispatches to workers; ``...:lease``, the id of the planner running the job, expiring unless renewed.
``<namespace>:planner:running`` is the set of jobs with a run under way: a job in it whose lease lapsed
lost its planner, and another planner takes the run up.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from forethought.planner.calibration import CalibratedProfile, profile_from_dict, profile_to_dict
from forethought.planner.job import Job
from forethought.planner.plans import ExecutionPlan
from forethought.planner.running import JobRun
from forethought.planner.schedule import Stage
from forethought.v1 import planner_pb2

HOLD_LEASE = """
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('SADD', KEYS[2], ARGV[3])
  return 1
end
return 0
"""
"""Takes or renews job ARGV[3]'s lease (KEYS[1]) for planner ARGV[1] for ARGV[2] ms and lists its run as under
way (KEYS[2]), unless another planner holds it."""

LET_GO_LEASE = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('DEL', KEYS[1])
  holder = false
end
if holder == false and ARGV[2] == '1' then
  redis.call('SREM', KEYS[2], ARGV[3])
end
return 0
"""
"""Gives up planner ARGV[1]'s lease of job ARGV[3]; ARGV[2] '1': the run ended, so it leaves the list of runs
under way (KEYS[2]), unless another planner holds it now."""

STATES = {"planned": planner_pb2.JOB_STATE_PLANNED, "running": planner_pb2.JOB_STATE_RUNNING,
          "done": planner_pb2.JOB_STATE_DONE, "failed": planner_pb2.JOB_STATE_FAILED}


@dataclass
class RunRecord:
    """The part of a run that is not per-request: what ``JobRun`` needs besides the finished requests."""

    state: str = "planned"
    pointer: int = 0
    running: dict[str, tuple[int, int]] = field(default_factory=dict)
    workers: dict[str, list[str]] = field(default_factory=dict)
    stage_started_s: list[float] = field(default_factory=list)
    ended_s: float | None = None
    max_tokens: int = 0
    max_prompt_tokens: int = 0
    replan: bool = False
    error: str = ""

    def to_json(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        raw: dict[str, Any] = json.loads(text)
        raw["running"] = {name: tuple(plan) for name, plan in raw["running"].items()}
        return cls(**raw)

    def take(self, run: JobRun, workers: dict[str, tuple[str, ...]]) -> None:
        """Copies the run's stage pointer, placement and times, and the replicas' workers."""
        self.pointer = run.pointer
        self.running = {name: (plan.dp, plan.tp) for name, plan in run.running.items()}
        self.workers = {name: list(found) for name, found in workers.items()}
        self.stage_started_s = list(run.stage_started_s)
        self.ended_s = run.ended_s


def stage_to_proto(stage: Stage) -> planner_pb2.ExecutionStage:
    return planner_pb2.ExecutionStage(
        placements=[planner_pb2.ModelPlacement(model=name, gpus=plan.tp, replicas=plan.dp) for name, plan in stage.assignments],
        estimated_s=stage.duration_s, start_s=stage.start_s, flops=stage.flops, finished_models=list(stage.finished_models),
    )


@dataclass
class StoredJob:
    job_id: str
    job: planner_pb2.PlanJob
    plan: planner_pb2.PlanResponse
    seed: int
    preemption: bool
    record: RunRecord
    cost_profiles: tuple[CalibratedProfile, ...] = ()
    """The calibrated profiles the job was planned with; a re-planning search uses them too."""

    def run(self, job: Job, finished: frozenset[str]) -> JobRun:
        """The run as stored, with ``finished`` requests."""
        record = self.record
        return JobRun(job, self.stages(), finished, record.pointer,
                      {name: ExecutionPlan(*plan) for name, plan in record.running.items()},
                      tuple(record.stage_started_s), record.ended_s)

    def stages(self) -> tuple[Stage, ...]:
        return tuple(
            Stage(tuple((p.model, ExecutionPlan(p.replicas, p.gpus)) for p in stage.placements), stage.start_s,
                  stage.estimated_s, stage.flops, tuple(stage.finished_models))
            for stage in self.plan.stages
        )


class JobStore:
    def __init__(self, client: aioredis.Redis, namespace: str) -> None:
        self._redis = client
        self._ns = namespace
        self._hold_lease = client.register_script(HOLD_LEASE)
        self._let_go_lease = client.register_script(LET_GO_LEASE)

    def _key(self, job_id: str) -> str:
        return f"{self._ns}:planner:job:{job_id}"

    def _lease_key(self, job_id: str) -> str:
        return f"{self._key(job_id)}:lease"

    def _running_key(self) -> str:
        return f"{self._ns}:planner:running"

    async def hold(self, job_id: str, planner_id: str, ttl_s: float) -> bool:
        """Takes or renews the job's lease for ``planner_id`` for ``ttl_s`` and marks its run as under way;
        False, changing nothing, when another planner holds it."""
        keys = [self._lease_key(job_id), self._running_key()]
        return bool(await self._hold_lease(keys=keys, args=[planner_id, round(ttl_s * 1000), job_id]))

    async def let_go(self, job_id: str, planner_id: str, ended: bool) -> None:
        """Gives up ``planner_id``'s lease of the job; ``ended``: its run is over, so no planner takes it up
        (unless another planner holds the job now: then its run goes on)."""
        await self._let_go_lease(keys=[self._lease_key(job_id), self._running_key()],
                                 args=[planner_id, int(ended), job_id])

    async def unheld_runs(self) -> list[str]:
        """Jobs with a run under way that no planner holds: their planner stopped or died."""
        job_ids = sorted(member.decode() for member in await self._redis.smembers(self._running_key()))
        if not job_ids:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.exists(self._lease_key(job_id))
            held = await pipe.execute()
        return [job_id for job_id, count in zip(job_ids, held, strict=True) if not count]

    async def create(self, job_id: str, job: planner_pb2.PlanJob, plan: planner_pb2.PlanResponse, seed: int,
                     preemption: bool, cost_profiles: Sequence[CalibratedProfile] = ()) -> bool:
        """Stores a planned job (its profiles whole, so no file is needed to re-plan); False when the id is taken."""
        # NOTE: the "job" field claims the id; get() sees the job once "run" is written after it.
        if not await self._redis.hsetnx(self._key(job_id), "job", job.SerializeToString()):
            return False
        profiles = json.dumps([profile_to_dict(profile) for profile in cost_profiles])
        await self._redis.hset(self._key(job_id), mapping={"plan": plan.SerializeToString(), "seed": seed,
                                                           "preemption": int(preemption), "cost_profiles": profiles,
                                                           "run": RunRecord().to_json()})
        return True

    async def get(self, job_id: str) -> StoredJob | None:
        entry = await self._redis.hgetall(self._key(job_id))
        if b"run" not in entry:
            return None
        return StoredJob(job_id, planner_pb2.PlanJob.FromString(entry[b"job"]),
                         planner_pb2.PlanResponse.FromString(entry[b"plan"]), int(entry[b"seed"]),
                         entry[b"preemption"] == b"1", RunRecord.from_json(entry[b"run"].decode()),
                         tuple(profile_from_dict(found, f"job {job_id}'s profile")
                               for found in json.loads(entry.get(b"cost_profiles", b"[]"))))

    async def save_stages(self, stored: StoredJob, stages: tuple[Stage, ...]) -> None:
        """Replaces the stages of the job's plan (a run searched the stages left again)."""
        plan = planner_pb2.PlanResponse()
        plan.CopyFrom(stored.plan)
        del plan.stages[:]
        plan.stages.extend(stage_to_proto(stage) for stage in stages)
        plan.estimated_makespan_s = sum(stage.duration_s for stage in stages)
        await self._redis.hset(self._key(stored.job_id), "plan", plan.SerializeToString())

    async def save(self, job_id: str, record: RunRecord) -> None:
        await self._redis.hset(self._key(job_id), "run", record.to_json())

    async def finish_request(self, job_id: str, request_id: str, token_ids: list[int], prompt_tokens: int) -> None:
        await self._redis.hset(f"{self._key(job_id)}:outputs", request_id,
                               json.dumps({"tokens": token_ids, "prompt_tokens": prompt_tokens}))

    async def outputs(self, job_id: str) -> dict[str, list[int]]:
        """Each finished request's output token ids."""
        entry = await self._redis.hgetall(f"{self._key(job_id)}:outputs")
        return {key.decode(): json.loads(value)["tokens"] for key, value in entry.items()}

    async def finished_count(self, job_id: str) -> int:
        return int(await self._redis.hlen(f"{self._key(job_id)}:outputs"))

    async def count_dispatch(self, job_id: str, request_id: str) -> int:
        """Counts one more dispatch of the request; returns its number (1 for the first)."""
        return int(await self._redis.hincrby(f"{self._key(job_id)}:sent", request_id, 1))

    async def dispatches(self, job_id: str) -> dict[str, int]:
        entry = await self._redis.hgetall(f"{self._key(job_id)}:sent")
        return {key.decode(): int(value) for key, value in entry.items()}
