"""Running a planned job: SamuLLM's running phase with its dynamic stage adjustment (section 4.3).

``JobRun`` is the state of one run: the job, its planned stages, the finished requests, the planned stage
being scheduled (``pointer``) and the models placed now with their plans. It is pure: the caller reports
finished requests and passes the time; ``schedule`` says which models run with which plan.

The dynamic scheduler, as the paper states it: a stage ends when any of its models finishes, whether or
not it is the one the plan expected. Each unfinished model ``M`` with plan ``P`` then

* keeps running until it finishes when no later stage involves it;
* keeps running when ``(M, P)`` is also in the next stage (it is scheduled from that stage);
* otherwise yields: the next stage's pairs are placed on the devices first, and ``(M, P)`` keeps its
  devices only if some are still free; else it is stopped, and its requests wait for its next stage.

Every pair of a stage must be placed (or its model finished) before the next stage is considered; a pair
that does not fit yet waits for the next finish. No search is redone, as in the paper; ``replanned``
instead searches the stages left again (Algorithm 1 on the work left, from the models running), for a
caller that chooses to when the run ``deviates`` from the plan.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from forethought.planner.job import Job, JobRequest
from forethought.planner.plans import ExecutionPlan
from forethought.planner.schedule import Stage, plan_stages
from forethought.planner.search import greedy_stage
from forethought.planner.stage_cost import CostModel
from forethought.planner.workload import Workload

DEFAULT_MAX_TOKENS = 256
VOCABULARY = 49152  # SmolLM2's: the synthetic prompt ids stay valid for the engines of this repository


class StalledRun(RuntimeError):
    """No model can run although the job is not done (a plan that does not cover the work left)."""


@dataclass(frozen=True)
class Placement:
    """What a scheduling decision changes: the models to start (or restart with a new plan) and to stop."""

    start: tuple[tuple[str, ExecutionPlan], ...]
    stop: tuple[str, ...]


@dataclass(frozen=True)
class JobRun:
    """One run of a planned job; ``stage_started_s`` holds when each stage up to ``pointer`` was reached."""

    job: Job
    stages: tuple[Stage, ...]
    finished: frozenset[str] = frozenset()
    pointer: int = 0
    running: Mapping[str, ExecutionPlan] = field(default_factory=dict)
    stage_started_s: tuple[float, ...] = ()
    ended_s: float | None = None

    @cached_property
    def _requests_by_model(self) -> Mapping[str, tuple[JobRequest, ...]]:
        grouped: dict[str, list[JobRequest]] = {}
        for request in self.job.requests:
            grouped.setdefault(request.model, []).append(request)
        return {model: tuple(found) for model, found in grouped.items()}

    @property
    def finished_models(self) -> frozenset[str]:
        return frozenset(model for model, requests in self._requests_by_model.items()
                         if all(r.request_id in self.finished for r in requests))

    @property
    def is_done(self) -> bool:
        return len(self.finished) == len(self.job.requests)

    @property
    def is_started(self) -> bool:
        return bool(self.stage_started_s)

    def with_finished(self, request_id: str, now: float) -> JobRun:
        """The run after ``request_id`` finished at ``now``."""
        finished = self.finished | {request_id}
        ended = now if len(finished) == len(self.job.requests) else self.ended_s
        return replace(self, finished=finished, ended_s=ended)

    def schedule(self, now: float) -> tuple[JobRun, Placement]:
        """The models to run from ``now``: the first call places the first stage; later calls end the
        current stage when a running model finished and adjust the next one (the module's rules)."""
        done = self.finished_models
        running = {name: plan for name, plan in self.running.items() if name not in done}
        pointer, started = self.pointer, list(self.stage_started_s)
        if not started:
            started.append(now)
        elif len(running) < len(self.running) and self._placed(pointer, running, done):
            pointer += 1
            started.append(now)
        while pointer < len(self.stages) and not self._unfinished_pairs(pointer, done):
            pointer += 1
            started.append(now)
        placed = self._place(pointer, running, done) if pointer < len(self.stages) else running
        if not placed and len(done) < len(self._requests_by_model):
            raise StalledRun(f"no model can run after stage {pointer} of {len(self.stages)}; "
                             f"unfinished: {', '.join(sorted(set(self._requests_by_model) - done))}")
        start = tuple((name, plan) for name, plan in placed.items() if self.running.get(name) != plan)
        stop = tuple(name for name, plan in self.running.items() if placed.get(name) != plan)
        after = replace(self, pointer=pointer, running=placed, stage_started_s=tuple(started))
        return after, Placement(start, stop)

    def deviates(self) -> bool:
        """Whether a stage is ending (a running model finished) with other models finished than the plan
        finishes by its end."""
        done = self.finished_models
        if self.is_done or self.pointer >= len(self.stages) or not any(name in done for name in self.running):
            return False
        return done != {name for stage in self.stages[:self.pointer + 1] for name in stage.finished_models}

    def replanned(self, workload: Workload, cost: CostModel, clock: Callable[[], float],
                  preemption: bool = True) -> JobRun:
        """The run with the stages after the current one searched again (Algorithm 1) on ``workload``, the
        job's sampled work, less the finished requests, from the models running now; the current stage
        says which models finished in it."""
        done = self.finished_models
        running = {name: plan for name, plan in self.running.items() if name not in done}
        left = workload.advance(set(self.finished), {})
        plan = plan_stages("samullm", cost, left, greedy_stage, clock, preemption, running)
        before = {name for stage in self.stages[:self.pointer] for name in stage.finished_models}
        current = replace(self.stages[self.pointer], finished_models=tuple(sorted(done - before)))
        return replace(self, stages=(*self.stages[:self.pointer], current, *plan.stages))

    def _unfinished_pairs(self, index: int, done: frozenset[str]) -> list[tuple[str, ExecutionPlan]]:
        return [(name, plan) for name, plan in self.stages[index].assignments if name not in done]

    def _placed(self, index: int, running: Mapping[str, ExecutionPlan], done: frozenset[str]) -> bool:
        """Whether every pair of stage ``index`` runs (or its model finished)."""
        return index >= len(self.stages) or all(running.get(name) == plan
                                                for name, plan in self._unfinished_pairs(index, done))

    def _place(self, index: int, running: Mapping[str, ExecutionPlan], done: frozenset[str]) -> dict[str, ExecutionPlan]:
        wanted = self._unfinished_pairs(index, done)
        later = {name for stage in self.stages[index:] for name, _ in stage.assignments}
        kept = {name: plan for name, plan in running.items() if (name, plan) in wanted or name not in later}
        free = self.job.devices.count - sum(plan.devices for plan in kept.values())
        placed = dict(kept)
        for name, plan in wanted:
            if name not in placed and plan.devices <= free:
                placed[name] = plan
                free -= plan.devices
        for name, plan in running.items():  # the yielding models keep what the stage left free
            if name not in placed and plan.devices <= free:
                placed[name] = plan
                free -= plan.devices
        return placed

    def ready_requests(self, in_flight: Sequence[str] | frozenset[str]) -> tuple[JobRequest, ...]:
        """Unfinished requests of running models, not in flight, whose inputs all finished; in the job's order."""
        busy = set(in_flight)
        return tuple(
            request for request in self.job.requests
            if request.model in self.running and request.request_id not in self.finished
            and request.request_id not in busy and all(source in self.finished for source in request.inputs)
        )

    def stage_times(self, now: float) -> tuple[tuple[float, float], ...]:
        """Each reached stage's planned duration and the time it took (to now while it runs); the last
        stage's holds the models that ran on past it."""
        end = self.ended_s if self.ended_s is not None else now
        starts = self.stage_started_s[:len(self.stages)]
        bounds = (*starts[1:], end)
        return tuple((self.stages[index].duration_s, bounds[index] - started) for index, started in enumerate(starts))

    def estimated_remaining_s(self, now: float) -> float:
        """The plan's durations of the stages not reached, plus what is left of the current one's."""
        if self.is_done or not self.stage_started_s:
            return 0.0 if self.is_done else sum(stage.duration_s for stage in self.stages)
        if self.pointer >= len(self.stages):
            return 0.0
        spent = now - self.stage_started_s[self.pointer]
        later = sum(stage.duration_s for stage in self.stages[self.pointer + 1:])
        return later + max(0.0, self.stages[self.pointer].duration_s - spent)


def assign_replicas(running: Mapping[str, ExecutionPlan], workers: Sequence[str],
                    placed: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """The workers each running model's ``dp`` replicas go to: where a replica runs already stays (no
    reload), the rest go to the workers holding the fewest replicas; at most one replica a worker."""
    live = set(workers)
    load = dict.fromkeys(workers, 0)
    chosen: dict[str, list[str]] = {}
    for name, plan in running.items():
        kept = [worker for worker in placed.get(name, ()) if worker in live][:plan.dp]
        chosen[name] = kept
        for worker in kept:
            load[worker] += 1
    for name, plan in running.items():
        while len(chosen[name]) < min(plan.dp, len(workers)):
            worker = min((w for w in workers if w not in chosen[name]), key=lambda w: load[w])
            chosen[name].append(worker)
            load[worker] += 1
    return {name: tuple(found) for name, found in chosen.items()}


def prompt_token_ids(request: JobRequest, outputs: Mapping[str, Sequence[int]], limit: int = 0) -> list[int]:
    """The request's prompt: ``prompt_tokens`` ids standing for its own text (the same in every run),
    then the outputs of its inputs in order (chain summary: the summary so far); the last ``limit`` kept."""
    origin = zlib.crc32(request.request_id.encode())
    ids = [(origin + index * 7919) % VOCABULARY for index in range(request.prompt_tokens)]
    for source in request.inputs:
        ids.extend(outputs[source])
    return ids[-limit:] if limit else ids


def max_tokens_of(job: Job, request: JobRequest, cap: int = 0) -> int:
    """A request's output limit: its known length, else its model's limit, else 256; at most ``cap``."""
    limit = request.output_tokens or job.model_by_name[request.model].max_output_tokens or DEFAULT_MAX_TOKENS
    return min(limit, cap) if cap else limit
