"""Calibrating SamuLLM's latency model against a real engine (section 4.1; section 5.1's estimation error).

The paper profiles each model's iteration latency on its engine and fits Eq. 5's coefficients per batch
size; here a grid of probes does it. A prefill probe runs ``B`` prompts of ``s`` tokens with one output
token each (one prefill iteration); a decode probe runs ``B`` prompts of ``context`` tokens and times the
gaps between their output tokens (one decode iteration each, the context growing by one a step).
``fit_calibration`` fits ``fit_latency_coefficients`` on those rows; held-out cases (whole batches of
requests the fit never saw, run end to end) are predicted with the planner's own simulation (``run_model``
on the project's engine core) and compared with their measured wall times.

A ``CalibratedProfile`` is JSON: under ``<cache>/profiles/<name>.json`` by name, or any path.
``calibrated_cost_model`` applies profiles to the job models of the same shape; the others keep the
roofline profiles. Pure apart from reading and writing those files.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forethought.cache import CACHE_ROOT
from forethought.costmodel import ModelSpec
from forethought.engine.executor import BatchShape, Executor
from forethought.planner.job import Job
from forethought.planner.latency import (
    LatencyCoefficients,
    LinearLatencyExecutor,
    LinearTerms,
    fit_latency_coefficients,
)
from forethought.planner.load_time import LoadTimeModel
from forethought.planner.model_run import EngineSettings, ExecutorFactory, run_model
from forethought.planner.plans import ExecutionPlan, ModelNode, valid_plans
from forethought.planner.stage_cost import CostModel, profile_executors
from forethought.planner.workload import RequestWork

PROFILES_DIR = CACHE_ROOT / "profiles"
"""Where ``forethought calibrate`` saves profiles by name."""

FORMAT = 1


@dataclass(frozen=True)
class PrefillProbe:
    """``batch`` prompts of ``prompt_tokens`` each, one output token: one prefill iteration."""

    batch: int
    prompt_tokens: int


@dataclass(frozen=True)
class DecodeProbe:
    """``batch`` prompts of ``context_tokens`` each, ``steps + 1`` output tokens: ``steps`` decode gaps."""

    batch: int
    context_tokens: int
    steps: int


@dataclass(frozen=True)
class HeldOutCase:
    """``batch`` requests of ``prompt_tokens`` and exactly ``output_tokens``, submitted together."""

    batch: int
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class CalibrationGrid:
    """The probes and held-out cases of one calibration. ``prefill_budget`` bounds a prefill probe's tokens:
    at most the engine's budget an iteration (vLLM's default 2,048: above it a probe takes two iterations),
    and below it to keep the profiling short on a CPU. Every probe runs ``repeats`` times; its median counts."""

    prefill_batches: tuple[int, ...] = (1, 2, 4, 8, 16)
    prompt_lengths: tuple[int, ...] = (32, 64, 128, 256)
    decode_batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    decode_contexts: tuple[int, ...] = (48, 192)
    decode_steps: int = 16
    repeats: int = 3
    heldout: tuple[HeldOutCase, ...] = (
        HeldOutCase(1, 200, 32), HeldOutCase(4, 150, 24), HeldOutCase(6, 80, 40),
        HeldOutCase(12, 60, 16), HeldOutCase(24, 40, 20),
    )
    prefill_budget: int = 1024

    def __post_init__(self) -> None:
        sizes = (*self.prefill_batches, *self.prompt_lengths, *self.decode_batches, *self.decode_contexts)
        if not sizes or min(sizes) < 1 or self.decode_steps < 2 or self.repeats < 1:
            raise ValueError("calibration grid sizes must be >= 1, decode_steps >= 2, repeats >= 1")

    def prefill_probes(self) -> tuple[PrefillProbe, ...]:
        return tuple(PrefillProbe(batch, length) for batch in self.prefill_batches for length in self.prompt_lengths
                     if batch * length <= self.prefill_budget)

    def decode_probes(self) -> tuple[DecodeProbe, ...]:
        return tuple(DecodeProbe(batch, context, self.decode_steps)
                     for batch in self.decode_batches for context in self.decode_contexts)


TINY_GRID = CalibrationGrid(prefill_batches=(1, 2), prompt_lengths=(16, 48, 96), decode_batches=(1, 4),
                            decode_contexts=(32, 128), decode_steps=4, repeats=1,
                            heldout=(HeldOutCase(2, 40, 6),))
"""A grid that runs in seconds, for tests."""


def prefill_rows(probe: PrefillProbe, seconds: Sequence[float]) -> list[tuple[BatchShape, float]]:
    """One row of the probe's median time (repeats absorb other processes' bursts on shared cores)."""
    shape = BatchShape(prefill_tokens=probe.batch * probe.prompt_tokens, prefill_requests=probe.batch)
    return [(shape, statistics.median(seconds))]


def decode_rows(probe: DecodeProbe, seconds_per_step: Sequence[float]) -> list[tuple[BatchShape, float]]:
    """One row of the median of the probe's runs' mean steps: step ``k`` decodes every request holding
    ``context + k`` tokens (the engine core's ``decode_context_tokens``, held before the iteration), and
    Eq. 5 is linear in them, so the mean step stands at the mean context."""
    mean_context = probe.batch * probe.context_tokens + probe.batch * (probe.steps - 1) // 2
    return [(BatchShape(decode_requests=probe.batch, decode_context_tokens=mean_context),
             statistics.median(seconds_per_step))]


@dataclass(frozen=True)
class HeldOutResult:
    """A held-out case's measured time (the profile's clock) beside the model's prediction; ``wall_s`` is
    its wall time, which on shared cores includes waiting for them."""

    case: HeldOutCase
    measured_s: float
    predicted_s: float
    wall_s: float = 0.0

    @property
    def error(self) -> float:
        """``|predicted - measured| / measured``."""
        return abs(self.predicted_s - self.measured_s) / self.measured_s


def mean_error(results: Sequence[HeldOutResult]) -> float:
    if not results:
        raise ValueError("no held-out results")
    return sum(result.error for result in results) / len(results)


def mean_wall_error(results: Sequence[HeldOutResult]) -> float:
    """The mean error of the predictions against the wall times."""
    if not results or any(result.wall_s <= 0 for result in results):
        raise ValueError("no held-out wall times")
    return sum(abs(r.predicted_s - r.wall_s) / r.wall_s for r in results) / len(results)


def predict_heldout(case: HeldOutCase, model: ModelNode, executor: Executor,
                    engine: EngineSettings | None = None) -> float:
    """Seconds the planner's simulation gives the case: its engine core stepping ``executor``'s times."""
    work = [RequestWork(f"heldout-{index}", model.name, case.prompt_tokens, case.output_tokens, ())
            for index in range(case.batch)]
    settings = engine or EngineSettings()
    capacity = case.batch * (case.prompt_tokens + case.output_tokens + settings.block_size)
    run = run_model(model, ExecutionPlan(1, 1), work, {request.request_id: 0.0 for request in work}, executor,
                    settings.engine_config(model, capacity))
    return run.end_s


@dataclass(frozen=True)
class CalibratedProfile:
    """Eq. 5's coefficients fitted for one model on one replica of ``tp`` devices, with where they came from.

    Attributes:
        engine: what was measured (engine, version, device, dtype) and the machine's load meanwhile.
        clock: what a measured second is: ``wall`` (a GPU host), or ``engine-cpu``, the CPU seconds of the
            engine's processes (a CPU engine on shared cores, whose wall time counts the others' use).
        load_s: the measured engine start (weights, KV cache, processes): the model's load time.
        rows: the probes the fit used.
    """

    name: str
    model: ModelNode
    tp: int
    engine: str
    coefficients: LatencyCoefficients
    load_s: float
    heldout: tuple[HeldOutResult, ...] = ()
    rows: int = 0
    command: str = ""
    clock: str = "wall"

    def executor(self, model: ModelNode | None = None, tp: int | None = None) -> LinearLatencyExecutor:
        """Eq. 5 for ``model`` (default: the profiled one) on ``tp`` devices (default: the profiled ``tp``)."""
        return LinearLatencyExecutor(model or self.model, tp or self.tp, self.coefficients)

    def matches(self, model: ModelNode) -> bool:
        """Whether ``model`` has the profiled shape (the job's name for it may differ)."""
        return model.spec == self.model.spec and model.hidden_size == self.model.hidden_size

    @property
    def mean_error(self) -> float:
        return mean_error(self.heldout)


def fit_calibration(name: str, model: ModelNode, tp: int, engine: str, rows: Sequence[tuple[BatchShape, float]],
                    heldout: Sequence[tuple[HeldOutCase, float, float]], load_s: float, command: str = "",
                    clock: str = "wall", settings: EngineSettings | None = None) -> CalibratedProfile:
    """Fits the rows and predicts every held-out ``(case, measured seconds, wall seconds)`` with the fit."""
    coefficients = fit_latency_coefficients(rows, model, tp)
    executor = LinearLatencyExecutor(model, tp, coefficients)
    results = tuple(HeldOutResult(case, measured, predict_heldout(case, model, executor, settings), wall)
                    for case, measured, wall in heldout)
    return CalibratedProfile(name, model, tp, engine, coefficients, load_s, results, len(rows), command, clock)


def profile_to_dict(profile: CalibratedProfile) -> dict[str, object]:
    spec = profile.model.spec
    return {
        "format": FORMAT,
        "name": profile.name,
        "engine": profile.engine,
        "clock": profile.clock,
        "command": profile.command,
        "model": {"name": profile.model.name, "max_seq_len": profile.model.max_seq_len,
                  "hidden_size": profile.model.hidden_size,
                  "spec": {"name": spec.name, "params": spec.params, "layers": spec.layers, "kv_heads": spec.kv_heads,
                           "head_dim": spec.head_dim, "bytes_per_param": spec.bytes_per_param}},
        "tp": profile.tp,
        "load_s": profile.load_s,
        "rows": profile.rows,
        "coefficients": {phase: {str(batch): [terms.flops_s, terms.padded_token_s, terms.total_token_s,
                                              terms.intercept_s] for batch, terms in sorted(table.items())}
                         for phase, table in profile.coefficients.terms.items()},
        "heldout": [{"batch": r.case.batch, "prompt_tokens": r.case.prompt_tokens,
                     "output_tokens": r.case.output_tokens, "measured_s": r.measured_s, "predicted_s": r.predicted_s,
                     "wall_s": r.wall_s}
                    for r in profile.heldout],
    }


def profile_from_dict(data: Any, source: str = "profile") -> CalibratedProfile:
    """The profile ``profile_to_dict`` wrote (parsed JSON); ValueError naming ``source`` for anything else."""
    try:
        if data["format"] != FORMAT:
            raise ValueError(f"format {data['format']!r}, this version reads {FORMAT}")
        model = data["model"]
        spec = ModelSpec(**model["spec"])
        node = ModelNode(str(model["name"]), spec, int(model["hidden_size"]), int(model["max_seq_len"]))
        terms = {str(phase): {int(batch): LinearTerms(*(float(value) for value in values))
                              for batch, values in table.items()}
                 for phase, table in data["coefficients"].items()}
        heldout = tuple(
            HeldOutResult(HeldOutCase(int(r["batch"]), int(r["prompt_tokens"]), int(r["output_tokens"])),
                          float(r["measured_s"]), float(r["predicted_s"]), float(r.get("wall_s", 0.0)))
            for r in data["heldout"])
        return CalibratedProfile(str(data["name"]), node, int(data["tp"]), str(data["engine"]),
                                 LatencyCoefficients(terms), float(data["load_s"]), heldout,
                                 int(data.get("rows", 0)), str(data.get("command", "")), str(data.get("clock", "wall")))
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ValueError(f"{source} is not a calibrated profile: {error!r}") from None


def profile_path(name_or_path: str, directory: Path = PROFILES_DIR) -> Path:
    """A path as given when it names a file or ends in ``.json``; else ``<directory>/<name>.json``."""
    given = Path(name_or_path).expanduser()
    return given if given.suffix == ".json" or given.is_file() else directory / f"{name_or_path}.json"


def save_profile(profile: CalibratedProfile, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile_to_dict(profile), indent=1) + "\n")
    return path


def load_profile(name_or_path: str, directory: Path = PROFILES_DIR) -> CalibratedProfile:
    """The profile saved by that name (under ``directory``) or at that path.

    Raises:
        FileNotFoundError: no such profile (the message lists the saved names).
        ValueError: the file is not a profile.
    """
    path = profile_path(name_or_path, directory)
    if not path.is_file():
        known = sorted(found.stem for found in directory.glob("*.json")) if directory.is_dir() else []
        raise FileNotFoundError(f"no calibrated profile {name_or_path!r} ({path}); saved: {', '.join(known) or 'none'}")
    return profile_from_dict(json.loads(path.read_text()), str(path))


@dataclass(frozen=True)
class CalibratedCosts:
    """What the profiles change in a job's cost model: executors and load times of the models they match."""

    profiles: tuple[CalibratedProfile, ...] = field(default_factory=tuple)

    def profile_for(self, model: ModelNode) -> CalibratedProfile | None:
        return next((profile for profile in self.profiles if profile.matches(model)), None)

    def executors(self, fallback: ExecutorFactory) -> ExecutorFactory:
        """Eq. 5 with a matching profile's coefficients (on any ``tp``: Eq. 1/2 divide its FLOPs), else
        ``fallback``."""

        def build(model: ModelNode, tp: int) -> Executor:
            profile = self.profile_for(model)
            return profile.executor(model, tp) if profile else fallback(model, tp)

        return build

    def load_times(self, job: Job, base: LoadTimeModel | None = None) -> LoadTimeModel:
        """``base`` with a matching profile's measured load time for every plan of its models (replicas load
        side by side; tensor parallelism's set-up on top is ``base``'s ``tp_setup_s`` a rank)."""
        base = base or LoadTimeModel()
        table = dict(base.table)
        for model in job.models:
            profile = self.profile_for(model)
            if profile is not None:
                for plan in valid_plans(model, job.devices):
                    table.setdefault((model.name, plan),
                                     profile.load_s + base.tp_setup_s * max(0, plan.tp - profile.tp))
        return LoadTimeModel(base.startup_s, base.tp_setup_s, base.read_bytes_per_s, table)


def calibrated_cost_model(job: Job, profiles: Sequence[CalibratedProfile] = (),
                          held: Mapping[str, int] | None = None) -> CostModel:
    """``CostModel(job)`` whose models of a profiled shape use the profile's executor and load time;
    ``held``: the single-device replicas of each model the live workers hold already (no load)."""
    if not profiles:
        return CostModel(job, held=held)
    costs = CalibratedCosts(tuple(profiles))
    return CostModel(job, executors=costs.executors(profile_executors(job.devices)),
                     load_times=costs.load_times(job), held=held)
