"""A multi-LLM offline job: its computation graph, requests and devices (SamuLLM section 3, Fig. 5).

Each node is an LLM; an edge ``a -> b`` says that requests of ``b`` take outputs of ``a`` as input. A
request names the requests whose outputs its prompt includes (``inputs``); it is ready once they finished.
An edge from a model to itself (chain summary: the summary so far is updated chunk by chunk) is fused as the
paper does before its search (section 4.2): the node stays one node, the self-edge leaves the graph, and
the order among its requests is kept by their ``inputs``. Any other cycle is refused.

``validate_job`` raises ``forethought.domain.InvalidField(field, rule)`` for an empty job, unknown names, a
cycle, or a model that no plan on the job's devices can hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from forethought.domain import InvalidField, require
from forethought.planner.plans import MAX_DEVICES, DevicePool, ModelNode, valid_plans


@dataclass(frozen=True)
class JobRequest:
    """One request of one model.

    Attributes:
        request_id: unique within the job.
        model: the node that answers it.
        prompt_tokens: its own prompt (instructions, a document chunk), without the inputs' outputs.
        inputs: requests whose outputs are appended to the prompt; it is ready when all have finished.
        output_tokens: the true output length when known (the paper's output-length-known variant);
            None to sample it from the model's eCDF.
    """

    request_id: str
    model: str
    prompt_tokens: int
    inputs: tuple[str, ...] = ()
    output_tokens: int | None = None


@dataclass(frozen=True)
class Job:
    """Models, the declared edges between them, their requests and the devices to run on."""

    models: tuple[ModelNode, ...]
    requests: tuple[JobRequest, ...]
    devices: DevicePool
    edges: tuple[tuple[str, str], ...] = ()

    @cached_property
    def model_by_name(self) -> Mapping[str, ModelNode]:
        return {model.name: model for model in self.models}

    @cached_property
    def request_by_id(self) -> Mapping[str, JobRequest]:
        return {request.request_id: request for request in self.requests}

    @cached_property
    def upstream(self) -> Mapping[str, frozenset[str]]:
        """Each model's input models, self-loops fused away."""
        sources: dict[str, set[str]] = {model.name: set() for model in self.models}
        for source, target in self.edges:
            if source != target:
                sources[target].add(source)
        return {name: frozenset(found) for name, found in sources.items()}

    @cached_property
    def fused(self) -> frozenset[str]:
        """Models whose self-loop was fused (their requests may take their own earlier outputs)."""
        return frozenset(source for source, target in self.edges if source == target)

    @cached_property
    def model_order(self) -> tuple[str, ...]:
        """Models in a topological order of the fused graph (ties in the job's order)."""
        return topological_order([model.name for model in self.models], self.upstream, "edges")

    @cached_property
    def requests_by_model(self) -> Mapping[str, tuple[JobRequest, ...]]:
        grouped: dict[str, list[JobRequest]] = {model.name: [] for model in self.models}
        for request in self.requests:
            grouped[request.model].append(request)
        return {name: tuple(found) for name, found in grouped.items()}


def topological_order(nodes: list[str], upstream: Mapping[str, Iterable[str]], field: str) -> tuple[str, ...]:
    """Kahn's order, ties kept in ``nodes`` order; InvalidField(field) names a cycle."""
    waiting = {node: set(upstream.get(node, ())) for node in nodes}
    downstream: dict[str, list[str]] = {node: [] for node in nodes}
    for node, sources in waiting.items():
        for source in sources:
            downstream[source].append(node)
    position = {node: index for index, node in enumerate(nodes)}
    ready = sorted((node for node, sources in waiting.items() if not sources), key=position.__getitem__)
    order: list[str] = []
    while ready:
        node = ready.pop(0)
        order.append(node)
        for target in downstream[node]:
            waiting[target].discard(node)
            if not waiting[target]:
                ready.append(target)
        ready.sort(key=position.__getitem__)
    if len(order) < len(nodes):
        stuck = sorted(node for node in nodes if node not in set(order))
        raise InvalidField(field, f"must not form a cycle (through {', '.join(stuck[:5])}); "
                                  "only a model's edge to itself is allowed, and it is fused")
    return tuple(order)


def validate_job(job: Job) -> None:
    """Raises InvalidField(field, rule) for the first rule ``job`` breaks."""
    require(len(job.models) > 0, "models", "must hold at least one model")
    require(len(job.requests) > 0, "requests", "must hold at least one request")
    require(0 < job.devices.count <= MAX_DEVICES, "devices.count", f"must be in 1..{MAX_DEVICES} (the devices of one node)")
    require(len(job.model_by_name) == len(job.models), "models", "names must be unique")
    require(len(job.request_by_id) == len(job.requests), "requests", "request ids must be unique")
    _validate_models(job)
    _validate_edges(job)
    for index, request in enumerate(job.requests):
        _validate_request(job, index, request)
    job.model_order  # noqa: B018 - raises on a cycle between models
    topological_order([r.request_id for r in job.requests], {r.request_id: r.inputs for r in job.requests},
                      "requests.inputs")


def _validate_models(job: Job) -> None:
    for model in job.models:
        field = f"models[{model.name}]"
        require(model.max_seq_len > 1, f"{field}.max_seq_len", "must be at least 2")
        require(model.hidden_size > 0, f"{field}.hidden_size", "must be positive")
        require(model.max_output_tokens is None or model.max_output_tokens > 0, f"{field}.max_output_tokens",
                "must be positive when set")
        if not valid_plans(model, job.devices):
            largest = job.devices.usable_bytes_per_device * job.devices.count
            raise InvalidField(field, f"needs {model.memory_need_bytes / 1e9:.1f} GB (weights and one "
                                      f"{model.max_seq_len}-token sequence's KV cache); the job's "
                                      f"{job.devices.count} devices hold {largest / 1e9:.1f} GB together")


def _validate_edges(job: Job) -> None:
    for source, target in job.edges:
        require(source in job.model_by_name and target in job.model_by_name, "edges",
                f"{source} -> {target} names a model the job does not hold")


def _validate_request(job: Job, index: int, request: JobRequest) -> None:
    field = f"requests[{index}]"
    model = job.model_by_name.get(request.model)
    require(model is not None, f"{field}.model", f"{request.model!r} is not a model of the job")
    assert model is not None  # NOTE: for the type checker; require raised otherwise
    require(0 < request.prompt_tokens < model.max_seq_len, f"{field}.prompt_tokens",
            f"must be in 1..{model.max_seq_len - 1} ({model.name}'s max_seq_len - 1)")
    require(request.output_tokens is None or request.output_tokens > 0, f"{field}.output_tokens",
            "must be positive when known")
    edges = set(job.edges)
    for source_id in request.inputs:
        source = job.request_by_id.get(source_id)
        require(source is not None, f"{field}.inputs", f"{source_id!r} is not a request of the job")
        assert source is not None
        require((source.model, request.model) in edges, f"{field}.inputs",
                f"takes {source_id!r} of {source.model}, but the job has no edge {source.model} -> {request.model}")
