"""The sampling-then-simulation cost of an execution stage (SamuLLM sections 3 and 4.1).

A stage ``E = ((M_1, P_1), ..., (M_k, P_k))`` runs its models side by side, each on its own devices. Every
model is simulated with its plan (``model_run``), in the fused graph's topological order, so a model whose
input model runs in the same stage sees its requests become ready as the upstream requests finish
(model-level pipelining). A model that the previous stage ran with another plan, or did not run, first
loads (``LoadTimeModel``); one kept with the same plan goes on at once, and so does a plan of single-device
replicas no more than the live workers already hold as their own model (``held``).

The stage ends when its first model finishes (``t_E = min t_{M_i,P_i}``, section 4.2), and its throughput
is ``T_E = FLOPs_E / t_E``, the FLOPs every model computed by then. ``StageCosting.cut`` re-runs the chosen
stage up to ``t_E`` to say which requests finished and how far the others got.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from forethought.costmodel import CostModelExecutor
from forethought.engine.core import EngineConfig
from forethought.engine.executor import Executor
from forethought.planner.job import Job
from forethought.planner.load_time import LoadTimeModel
from forethought.planner.model_run import EngineSettings, ExecutorFactory, ModelRun, run_model
from forethought.planner.plans import DevicePool, ExecutionPlan, ModelNode, replica_profile
from forethought.planner.workload import Workload

Assignments = Mapping[str, ExecutionPlan]
"""A stage's models and their plans."""


def profile_executors(pool: DevicePool) -> ExecutorFactory:
    """Executors from ``forethought.costmodel``'s derived profiles, one per model and tensor-parallel degree."""

    def build(model: ModelNode, tp: int) -> Executor:
        return CostModelExecutor(replica_profile(model, pool, tp))

    return build


@dataclass(frozen=True)
class StageEstimate:
    """A candidate stage's estimate: ``duration_s`` is ``t_E``, ``flops`` is ``FLOPs_E``."""

    assignments: tuple[tuple[str, ExecutionPlan], ...]
    duration_s: float
    flops: float
    runs: Mapping[str, ModelRun]

    @property
    def devices(self) -> int:
        return sum(plan.devices for _, plan in self.assignments)

    @property
    def throughput(self) -> float:
        """``T_E``; 0 for the empty stage."""
        return self.flops / self.duration_s if self.assignments and self.duration_s > 0 else 0.0


EMPTY_STAGE = StageEstimate((), 0.0, 0.0, {})


class CostModel:
    """The cost model ``C`` of Algorithm 1: executors, engine sizes and load times for a job's models."""

    def __init__(
        self,
        job: Job,
        executors: ExecutorFactory | None = None,
        load_times: LoadTimeModel | None = None,
        engine: EngineSettings | None = None,
        held: Mapping[str, int] | None = None,
    ) -> None:
        self.job = job
        self.held = dict(held or {})
        """Single-device replicas of each model the live workers hold as their own model, loaded all job long."""
        self._build_executor = executors or profile_executors(job.devices)
        self.load_times = load_times or LoadTimeModel()
        self.engine = engine or EngineSettings()
        self._executors: dict[tuple[str, int], Executor] = {}
        self._configs: dict[tuple[str, int], EngineConfig] = {}
        self.ancestors = _ancestors(job)
        self.runs: dict[tuple[object, ...], ModelRun] = {}
        """Every run simulated, by everything it depends on (kept across stages)."""

    def executor(self, model: str, tp: int) -> Executor:
        key = (model, tp)
        if key not in self._executors:
            self._executors[key] = self._build_executor(self.job.model_by_name[model], tp)
        return self._executors[key]

    def engine_config(self, model: str, tp: int) -> EngineConfig:
        key = (model, tp)
        if key not in self._configs:
            node = self.job.model_by_name[model]
            capacity = replica_profile(node, self.job.devices, tp).kv_capacity_tokens
            self._configs[key] = self.engine.engine_config(node, capacity)
        return self._configs[key]

    def is_loaded(self, model: str, plan: ExecutionPlan) -> bool:
        """Whether the workers' own models cover ``plan`` (tp 1, no more replicas than workers hold it)."""
        return plan.tp == 1 and plan.dp <= self.held.get(model, 0)

    def for_stage(self, workload: Workload, loaded: Assignments) -> StageCosting:
        """Costs candidate stages from ``workload``, after a stage that ran ``loaded``."""
        return StageCosting(self, workload, loaded)


class StageCosting:
    """Estimates of the stages that could come next; a model's run is simulated once per plan, plans of
    its upstream models in the stage, load time and work left (``CostModel.runs`` keeps them)."""

    def __init__(self, cost: CostModel, workload: Workload, loaded: Assignments) -> None:
        self.cost = cost
        self.workload = workload
        self.loaded = dict(loaded)
        self._runs: dict[tuple[object, ...], ModelRun] = {}
        self.simulations = 0

    def estimate(self, assignments: Assignments) -> StageEstimate:
        """``t_E``, ``FLOPs_E`` and each model's run for the stage ``assignments``."""
        if not assignments:
            return EMPTY_STAGE
        runs = self._runs_of(assignments, math.inf)
        duration = min(run.end_s for run in runs.values())
        if not math.isfinite(duration):
            raise ValueError(f"no model of the stage {sorted(assignments)} can finish: an input model is missing")
        flops = sum(run.flops_until(duration) for run in runs.values())
        ordered = tuple((name, assignments[name]) for name in self.cost.job.model_order if name in assignments)
        return StageEstimate(ordered, duration, flops, runs)

    def cut(self, assignments: Assignments, until: float) -> tuple[set[str], dict[str, int]]:
        """The requests the stage finishes by ``until`` and the tokens the others generated by then."""
        finished: set[str] = set()
        generated: dict[str, int] = {}
        for run in self._runs_of(assignments, until).values():
            finished.update(run.finish_s)
            generated.update(run.generated)
        return finished, generated

    def _runs_of(self, assignments: Assignments, until: float) -> dict[str, ModelRun]:
        """Each model's run; one fed by a model of the stage is cut at the earliest end before it (the stage
        ends by then, and iterations before a time depend on nothing after it, so ``t_E`` and ``FLOPs_E`` are
        the same). A model fed by none runs whole: that run is the same in every stage it joins."""
        runs: dict[str, ModelRun] = {}
        earliest = until
        for name in self.cost.job.model_order:
            if name in assignments:
                fed = any(source in assignments for source in self.cost.ancestors[name])
                runs[name] = self._run(name, assignments, runs, earliest if fed else until)
                earliest = min(earliest, runs[name].end_s)
        return runs

    def _run(self, name: str, assignments: Assignments, runs: Mapping[str, ModelRun], until: float) -> ModelRun:
        plan = assignments[name]
        upstream = tuple(sorted((m, assignments[m]) for m in self.cost.ancestors[name] if m in assignments))
        key = (name, plan, upstream, until)
        cached = self._runs.get(key)
        if cached is not None:
            return cached
        node = self.cost.job.model_by_name[name]
        already = self.loaded.get(name) == plan or self.cost.is_loaded(name, plan)
        load = 0.0 if already else self.cost.load_times.load_time(node, plan)
        work = self.workload.remaining_by_model.get(name, ())
        ready = self._ready_times(name, runs)
        whole = self.cost.runs.get((name, plan, load, work, tuple(ready.items()), math.inf))
        if whole is not None and whole.end_s <= until:  # it ended by the cut, so the cut changes nothing
            self._runs[key] = whole
            return whole
        # NOTE: a request ready at or after the cut never starts, the same as one never ready
        ready = {request_id: at for request_id, at in ready.items() if at < until}
        # NOTE: a run is a function of these alone, so a model that sat a stage out is not simulated again.
        content = (name, plan, load, work, tuple(ready.items()), until)
        run = self.cost.runs.get(content)
        if run is None:
            run = run_model(node, plan, work, ready, self.cost.executor(name, plan.tp),
                            self.cost.engine_config(name, plan.tp), load, until)
            self.cost.runs[content] = run
            self.simulations += 1
        self._runs[key] = run
        return run

    def _ready_times(self, name: str, runs: Mapping[str, ModelRun]) -> dict[str, float]:
        """When each request's inputs from other models (or earlier stages) are ready; absent: never."""
        finished, requests = self.workload.finished, self.cost.job.request_by_id
        ready: dict[str, float] = {}
        for work in self.workload.remaining_by_model.get(name, ()):
            latest = 0.0
            for source in work.inputs:
                source_model = requests[source].model
                if source in finished or source_model == name:
                    continue
                done = runs[source_model].finish_s.get(source) if source_model in runs else None
                if done is None:
                    break
                latest = max(latest, done)
            else:
                ready[work.request_id] = latest
        return ready


def _ancestors(job: Job) -> dict[str, frozenset[str]]:
    found: dict[str, frozenset[str]] = {}
    for name in job.model_order:
        direct = job.upstream[name]
        found[name] = frozenset(direct).union(*(found[source] for source in direct))
    return found
