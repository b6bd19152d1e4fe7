"""Job files: a multi-LLM offline job described in YAML (or JSON), read into a ``Job`` with its output-length
sources and seed (docs/planner.md, "Job files").

A file names its devices, its models (a known shape by name, or the shape's numbers) with where each model's
output lengths come from (observed lengths, or a CASTILLO model's), and its graph: one of the paper's
applications with generated or listed prompt lengths (``ensembling``, ``routing``, ``chain_summary``), or
``explicit`` requests and edges. Generated prompt lengths are drawn from ``random.Random(seed)``; the planner
draws output lengths from a generator seeded with the same number, so a file always gives the same plan.

Every broken rule raises ``forethought.domain.InvalidField`` naming the field's path in the file
(``models[1].spec``, ``graph.prompts.input_tokens.max``); rules of the job itself are ``validate_job``'s.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from forethought.costmodel import HardwareSpec, ModelSpec
from forethought.costmodel.registry import A100_80GB, CPU_2_CORES, H100_80GB, LLAMA_7B, LLAMA_13B, LLAMA_70B, SMOLLM2_135M
from forethought.demand.schema import integer, mapping, no_unknown_keys, number, sequence, text
from forethought.documents import read_document
from forethought.domain import InvalidField, require
from forethought.planner.applications import chain_summary_job, ensembling_job, routing_job
from forethought.planner.baselines import heuristic_plan
from forethought.planner.calibration import CalibratedProfile, calibrated_cost_model
from forethought.planner.job import Job, JobRequest, validate_job
from forethought.planner.lengths import OutputLengthCDF
from forethought.planner.plans import DevicePool, ModelNode
from forethought.planner.schedule import ApplicationPlan
from forethought.planner.search import samullm_plan

MODEL_SHAPES: Mapping[str, tuple[ModelSpec, int]] = {
    spec.name: (spec, hidden) for spec, hidden in
    ((LLAMA_7B, 4096), (LLAMA_13B, 5120), (LLAMA_70B, 8192), (SMOLLM2_135M, 576))
}
"""Known model shapes by name, with their hidden sizes (the models' published configurations)."""

HARDWARE: Mapping[str, HardwareSpec] = {"A100-80GB": A100_80GB, "H100-80GB": H100_80GB, "cpu-2-cores": CPU_2_CORES}
"""Known accelerators by name (forethought.costmodel.registry; docs/costmodel.md gives their sources)."""

GRAPH_KINDS = ("ensembling", "routing", "chain_summary", "explicit")
MAX_REQUESTS = 100_000


@dataclass(frozen=True)
class LengthSource:
    """Where a model's output lengths come from: ``observed`` lengths, else a CASTILLO model's."""

    observed: tuple[int, ...] = ()
    castillo_model: str = ""


@dataclass(frozen=True)
class JobFile:
    """What a job file describes: the job, each model's output-length source, the devices' name, the seed."""

    name: str
    job: Job
    lengths: Mapping[str, LengthSource]
    hardware: str
    seed: int = 0


CastilloLoader = Callable[[], Mapping[str, OutputLengthCDF]]
"""Reads the CASTILLO eCDFs when a job asks for one (e.g. ``lambda: load_castillo(castillo_path())``)."""


def load_job_file(path: str | Path) -> JobFile:
    """Reads ``path`` (``.yaml``, ``.yml`` or ``.json``); InvalidField names the broken field."""
    return job_file_from_dict(read_document(path), default_name=Path(path).stem)


def job_file_from_dict(data: object, default_name: str = "job") -> JobFile:
    """The job a parsed file describes, validated (``validate_job``) and with every model's length source."""
    root = mapping(data, "job")
    no_unknown_keys(root, {"name", "description", "seed", "devices", "models", "graph"}, "job")
    seed = integer(root.get("seed", 0), "seed")
    hardware, devices = _devices(root.get("devices"))
    models_data = sequence(root.get("models"), "models")
    require(len(models_data) > 0, "models", "must hold at least one model")
    parsed = [_model(value, f"models[{index}]") for index, value in enumerate(models_data)]
    models = [model for model, _ in parsed]
    job = _graph(root.get("graph"), models, devices, random.Random(seed))
    validate_job(job)
    lengths = {model.name: source for model, source in parsed if source is not None}
    for model in job.models:
        unknown = any(request.output_tokens is None for request in job.requests_by_model[model.name])
        require(model.name in lengths or not unknown, f"models[{model.name}].output_lengths",
                "is required: some of its requests have no known output_tokens")
    name = text(root.get("name", default_name), "name")
    return JobFile(name, job, lengths, hardware, seed)


def resolve_cdfs(job_file: JobFile, castillo: CastilloLoader | None = None) -> dict[str, OutputLengthCDF]:
    """Each model's eCDF; ``castillo`` is called once, only when some model names a CASTILLO model."""
    cdfs: dict[str, OutputLengthCDF] = {}
    known: Mapping[str, OutputLengthCDF] | None = None
    for name, source in job_file.lengths.items():
        field = f"models[{name}].output_lengths"
        if source.observed:
            cdfs[name] = _observed_cdf(source.observed, field)
            continue
        if known is None:
            require(castillo is not None, f"{field}.castillo", "no CASTILLO data is available here")
            assert castillo is not None  # NOTE: for the type checker; require raised otherwise
            known = castillo()
        require(source.castillo_model in known, f"{field}.castillo",
                f"{source.castillo_model!r} is not a CASTILLO model (known: {', '.join(sorted(known))})")
        cdfs[name] = known[source.castillo_model]
    return cdfs


@dataclass(frozen=True)
class JobPlans:
    """Algorithm 1's plan of a job and, when asked for, the two heuristics' on the same sampled lengths."""

    samullm: ApplicationPlan
    max_heuristic: ApplicationPlan | None = None
    min_heuristic: ApplicationPlan | None = None


def plan_job(job_file: JobFile, cdfs: Mapping[str, OutputLengthCDF], clock: Callable[[], float],
             preemption: bool = True, baselines: bool = True,
             profiles: Sequence[CalibratedProfile] = (), held: Mapping[str, int] | None = None) -> JobPlans:
    """Plans ``job_file`` with Algorithm 1 and (``baselines``) the Max- and Min-heuristics; each method draws
    the output lengths from ``random.Random(job_file.seed)``, so all three plan the same work. They share
    one cost model (calibrated ``profiles`` applied to the models of their shape), so a model run one method
    simulated is not simulated again for the next (the heuristics' ``simulations`` count only the runs new
    to them). ``held``: the single-device replicas of each model the live workers already hold (no load)."""
    job = job_file.job
    validate_job(job)  # NOTE: before the cost model, which walks the graph
    cost = calibrated_cost_model(job, profiles, held)

    def rng() -> random.Random:
        return random.Random(job_file.seed)

    samullm = samullm_plan(job, cdfs, rng(), clock, cost, preemption)
    if not baselines:
        return JobPlans(samullm)
    return JobPlans(samullm, heuristic_plan("max", job, cdfs, rng(), clock, cost, preemption),
                    heuristic_plan("min", job, cdfs, rng(), clock, cost, preemption))


def _observed_cdf(observed: Sequence[int], field: str) -> OutputLengthCDF:
    try:
        return OutputLengthCDF.from_observations(observed)
    except ValueError as error:
        raise InvalidField(field, str(error)) from error


def _devices(value: object) -> tuple[str, DevicePool]:
    data = mapping(value, "devices")
    no_unknown_keys(data, {"hardware", "count", "tp_efficiency"}, "devices")
    hardware = text(data.get("hardware"), "devices.hardware")
    require(hardware in HARDWARE, "devices.hardware", f"must be one of {', '.join(HARDWARE)}")
    count = integer(data.get("count"), "devices.count")
    efficiency = number(data.get("tp_efficiency", 0.85), "devices.tp_efficiency")
    require(0 < efficiency <= 1, "devices.tp_efficiency", "must be in (0, 1]")
    return hardware, DevicePool(HARDWARE[hardware], count, efficiency)


def _model(value: object, field: str) -> tuple[ModelNode, LengthSource | None]:
    data = mapping(value, field)
    no_unknown_keys(data, {"name", "spec", "shape", "max_seq_len", "max_output_tokens", "output_lengths"}, field)
    name = text(data.get("name"), f"{field}.name")
    require(("spec" in data) != ("shape" in data), field, "needs exactly one of spec (a known shape) or shape")
    if "spec" in data:
        known = text(data["spec"], f"{field}.spec")
        require(known in MODEL_SHAPES, f"{field}.spec", f"must be one of {', '.join(MODEL_SHAPES)}")
        spec, hidden = MODEL_SHAPES[known]
    else:
        spec, hidden = _shape(data["shape"], f"{field}.shape", name)
    limit = data.get("max_output_tokens")
    node = ModelNode(name, spec, hidden, integer(data.get("max_seq_len", 4096), f"{field}.max_seq_len"),
                     None if limit is None else integer(limit, f"{field}.max_output_tokens"))
    lengths = data.get("output_lengths")
    return node, None if lengths is None else _length_source(lengths, f"{field}.output_lengths")


def _shape(value: object, field: str, name: str) -> tuple[ModelSpec, int]:
    data = mapping(value, field)
    keys = {"params", "layers", "kv_heads", "head_dim", "hidden_size"}
    no_unknown_keys(data, keys | {"bytes_per_param"}, field)
    for key in sorted(keys):
        require(key in data, f"{field}.{key}", "is required")
    params = number(data["params"], f"{field}.params")
    require(params > 0, f"{field}.params", "must be positive")
    whole = {key: integer(data[key], f"{field}.{key}") for key in ("layers", "kv_heads", "head_dim", "hidden_size")}
    whole["bytes_per_param"] = integer(data.get("bytes_per_param", 2), f"{field}.bytes_per_param")
    for key, found in whole.items():
        require(found > 0, f"{field}.{key}", "must be positive")
    spec = ModelSpec(name, params, whole["layers"], whole["kv_heads"], whole["head_dim"], whole["bytes_per_param"])
    return spec, whole["hidden_size"]


def _length_source(value: object, field: str) -> LengthSource:
    if isinstance(value, Mapping):
        data = mapping(value, field)
        no_unknown_keys(data, {"castillo"}, field)
        return LengthSource(castillo_model=text(data.get("castillo"), f"{field}.castillo"))
    observed = tuple(integer(length, f"{field}[{index}]") for index, length in enumerate(sequence(value, field)))
    _observed_cdf(observed, field)
    return LengthSource(observed=observed)


def _graph(value: object, models: list[ModelNode], devices: DevicePool, rng: random.Random) -> Job:
    data = mapping(value, "graph")
    kind = text(data.get("kind"), "graph.kind")
    require(kind in GRAPH_KINDS, "graph.kind", f"must be one of {', '.join(GRAPH_KINDS)}")
    if kind == "ensembling":
        no_unknown_keys(data, {"kind", "prompts"}, "graph")
        return ensembling_job(models, _prompt_lengths(data.get("prompts"), "graph.prompts", rng), devices)
    if kind == "routing":
        no_unknown_keys(data, {"kind", "routed"}, "graph")
        routed = mapping(data.get("routed"), "graph.routed")
        names = {model.name for model in models}
        for name in routed:
            require(name in names, f"graph.routed.{name}", "is not a model of the job")
        return routing_job(models, {name: _prompt_lengths(prompts, f"graph.routed.{name}", rng)
                                    for name, prompts in routed.items()}, devices)
    if kind == "chain_summary":
        return _chain_summary(data, models, devices, rng)
    return _explicit(data, models, devices)


def _prompt_lengths(value: object, field: str, rng: random.Random) -> list[int]:
    """``input_tokens`` as a list, or ``count`` lengths drawn uniformly from ``input_tokens: {min, max}``."""
    data = mapping(value, field)
    no_unknown_keys(data, {"count", "input_tokens"}, field)
    tokens = data.get("input_tokens")
    if not isinstance(tokens, Mapping):
        require("count" not in data, f"{field}.count", "is the length of the input_tokens list; leave it out")
        lengths = [integer(length, f"{field}.input_tokens[{index}]")
                   for index, length in enumerate(sequence(tokens, f"{field}.input_tokens"))]
        require(len(lengths) <= MAX_REQUESTS, f"{field}.input_tokens", f"must hold at most {MAX_REQUESTS} lengths")
        return lengths
    count = integer(data.get("count"), f"{field}.count")
    require(0 <= count <= MAX_REQUESTS, f"{field}.count", f"must be in 0..{MAX_REQUESTS}")
    low, high = _range(tokens, f"{field}.input_tokens")
    return [rng.randint(low, high) for _ in range(count)]


def _range(value: object, field: str) -> tuple[int, int]:
    data = mapping(value, field)
    no_unknown_keys(data, {"min", "max"}, field)
    low, high = integer(data.get("min"), f"{field}.min"), integer(data.get("max"), f"{field}.max")
    require(low >= 1, f"{field}.min", "must be at least 1")
    require(high >= low, f"{field}.max", f"must be at least min ({low})")
    return low, high


def _chain_summary(data: Mapping[str, object], models: list[ModelNode], devices: DevicePool,
                   rng: random.Random) -> Job:
    known = {"kind", "summarizer", "evaluator", "documents", "evaluations", "instruction_tokens",
             "evaluator_prompt_tokens"}
    no_unknown_keys(data, known, "graph")
    by_name = {model.name: model for model in models}
    roles = {}
    for role in ("summarizer", "evaluator"):
        name = text(data.get(role), f"graph.{role}")
        require(name in by_name, f"graph.{role}", f"{name!r} is not a model of the job")
        roles[role] = by_name[name]
    require(len(models) == 2 and roles["summarizer"] is not roles["evaluator"], "models",
            "a chain summary has exactly two models, its summarizer and its evaluator")
    evaluations = integer(data.get("evaluations", 1), "graph.evaluations")
    require(evaluations >= 0, "graph.evaluations", "must be >= 0")
    return chain_summary_job(
        roles["summarizer"], roles["evaluator"], _documents(data.get("documents"), rng), devices, evaluations,
        integer(data.get("instruction_tokens", 0), "graph.instruction_tokens"),
        integer(data.get("evaluator_prompt_tokens", 32), "graph.evaluator_prompt_tokens"),
    )


def _documents(value: object, rng: random.Random) -> list[list[int]]:
    """Each document's chunk lengths: listed, or ``count`` documents of ``tokens: {min, max}`` cut into
    ``chunk_tokens`` chunks (the paper cuts 2,048-token chunks)."""
    field = "graph.documents"
    if not isinstance(value, Mapping):
        return [[integer(chunk, f"{field}[{d}][{c}]") for c, chunk in enumerate(sequence(doc, f"{field}[{d}]"))]
                for d, doc in enumerate(sequence(value, field))]
    data = mapping(value, field)
    no_unknown_keys(data, {"count", "tokens", "chunk_tokens"}, field)
    count = integer(data.get("count"), f"{field}.count")
    require(1 <= count <= MAX_REQUESTS, f"{field}.count", f"must be in 1..{MAX_REQUESTS}")
    chunk = integer(data.get("chunk_tokens", 2048), f"{field}.chunk_tokens")
    require(chunk >= 1, f"{field}.chunk_tokens", "must be at least 1")
    low, high = _range(data.get("tokens"), f"{field}.tokens")
    documents = []
    for _ in range(count):
        length = rng.randint(low, high)
        documents.append([min(chunk, length - start) for start in range(0, length, chunk)])
    return documents


def _explicit(data: Mapping[str, object], models: list[ModelNode], devices: DevicePool) -> Job:
    no_unknown_keys(data, {"kind", "edges", "requests"}, "graph")
    edges = []
    for index, edge in enumerate(sequence(data.get("edges", []), "graph.edges")):
        pair = sequence(edge, f"graph.edges[{index}]")
        require(len(pair) == 2, f"graph.edges[{index}]", "must be [source, target]")
        edges.append((text(pair[0], f"graph.edges[{index}][0]"), text(pair[1], f"graph.edges[{index}][1]")))
    requests = []
    for index, value in enumerate(sequence(data.get("requests"), "graph.requests")):
        field = f"graph.requests[{index}]"
        request = mapping(value, field)
        no_unknown_keys(request, {"id", "model", "prompt_tokens", "inputs", "output_tokens"}, field)
        known = request.get("output_tokens")
        inputs = sequence(request.get("inputs", []), f"{field}.inputs")
        requests.append(JobRequest(
            text(request.get("id"), f"{field}.id"), text(request.get("model"), f"{field}.model"),
            integer(request.get("prompt_tokens"), f"{field}.prompt_tokens"),
            tuple(text(source, f"{field}.inputs[{i}]") for i, source in enumerate(inputs)),
            None if known is None else integer(known, f"{field}.output_tokens"),
        ))
    return Job(tuple(models), tuple(requests), devices, tuple(edges))
