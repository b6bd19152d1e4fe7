"""A PDGraph as a plain dict and back (Hermes section 4 keeps each application's PDGraph as JSON), so a
shell can store it anywhere (a JSON file, a Redis string) and restore it with every profile it learnt.

The dict holds only strings, numbers, lists, dicts and None::

    {"name": "code_generation", "entry": "write_code", "max_recorded": 1000,
     "units": [{"name": "write_code",
                "backend": {"kind": "llm", "model": "llama-2-7b", "lora_adapter": "", "tool": "", "prompt_prefix": ""},
                "next": {"run_tests": 1.0},
                "records": [{"consumption": {...}, "upstream": null, "jump": "run_tests"}, ...]}, ...]}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from forethought.demand.consumption import Consumption, Observation, UnitExecution
from forethought.demand.graph import END, MAX_RECORDED, BackendKind, BackendSpec, FunctionalUnit, PDGraph
from forethought.demand.schema import integer, mapping, no_unknown_keys, number, sequence, text
from forethought.domain import InvalidField, require


def graph_to_dict(graph: PDGraph) -> dict[str, Any]:
    """Everything needed to rebuild ``graph``: structure, declared priors, recorded executions."""
    return {
        "name": graph.name,
        "entry": graph.entry,
        "max_recorded": graph.max_recorded,
        "units": [
            {
                "name": unit.name,
                "backend": backend_to_dict(unit.backend),
                "next": dict(unit.next_units),
                "records": [_record_to_dict(observation, jump) for observation, jump in graph.profiles[unit.name].entries()],
            }
            for unit in graph.units.values()
        ],
    }


def graph_from_dict(data: object) -> PDGraph:
    """Rebuilds a graph written by ``graph_to_dict``.

    Raises:
        InvalidField: a field is missing or of the wrong type, or the graph breaks a rule of ``PDGraph``.
    """
    root = mapping(data, "graph")
    no_unknown_keys(root, {"name", "entry", "max_recorded", "units"}, "graph")
    units_data = [mapping(item, f"units[{i}]") for i, item in enumerate(sequence(root.get("units", []), "units"))]
    units = [_unit_from_dict(item, f"units[{i}]") for i, item in enumerate(units_data)]
    graph = graph_of(root, units)
    for item, unit in zip(units_data, units):
        field = f"units.{unit.name}.records"
        for index, record in enumerate(sequence(item.get("records", []), field)):
            observation, jump = _record_from_dict(graph, unit, record, f"{field}[{index}]")
            graph.profiles[unit.name].add(observation, jump)
    return graph


def graph_of(root: Mapping[str, object], units: Sequence[FunctionalUnit]) -> PDGraph:
    """The graph of ``units`` with the name, entry and record bound that ``root`` (a file or stored form) gives."""
    entry = root.get("entry")
    return PDGraph(
        text(root.get("name"), "name"),
        list(units),
        entry=None if entry is None else text(entry, "entry"),
        max_recorded=integer(root.get("max_recorded", MAX_RECORDED), "max_recorded"),
    )


def backend_to_dict(backend: BackendSpec) -> dict[str, str]:
    return {"kind": backend.kind.value, "model": backend.model, "lora_adapter": backend.lora_adapter, "tool": backend.tool,
            "prompt_prefix": backend.prompt_prefix}


def backend_from_dict(data: object, field: str) -> BackendSpec:
    backend = mapping(data, field)
    no_unknown_keys(backend, {"kind", "model", "lora_adapter", "tool", "prompt_prefix"}, field)
    kinds = {kind.value: kind for kind in BackendKind}
    kind = backend.get("kind")
    if kind not in kinds:
        raise InvalidField(f"{field}.kind", f"must be one of {', '.join(kinds)}")
    spec = BackendSpec(
        kind=kinds[str(kind)],
        model=_optional_text(backend.get("model"), f"{field}.model"),
        lora_adapter=_optional_text(backend.get("lora_adapter"), f"{field}.lora_adapter"),
        tool=_optional_text(backend.get("tool"), f"{field}.tool"),
        prompt_prefix=_optional_text(backend.get("prompt_prefix"), f"{field}.prompt_prefix"),
    )
    spec.validate(field)
    return spec


def next_units_from_dict(data: object, field: str) -> dict[str, float]:
    return {target: number(probability, f"{field}.{target}") for target, probability in mapping(data, field).items()}


def _unit_from_dict(data: Mapping[str, object], field: str) -> FunctionalUnit:
    no_unknown_keys(data, {"name", "backend", "next", "records"}, field)
    name = text(data.get("name"), f"{field}.name")
    return FunctionalUnit(
        name=name,
        backend=backend_from_dict(data.get("backend"), f"units.{name}.backend"),
        next_units=next_units_from_dict(data.get("next", {}), f"units.{name}.next"),
    )


def _record_to_dict(observation: Observation, jump: str) -> dict[str, Any]:
    upstream = observation.upstream
    return {
        "consumption": observation.consumption.to_dict(),
        "upstream": None if upstream is None else {"unit": upstream.unit, "consumption": upstream.consumption.to_dict()},
        "jump": jump,
    }


def _record_from_dict(graph: PDGraph, unit: FunctionalUnit, data: object, field: str) -> tuple[Observation, str]:
    record = mapping(data, field)
    no_unknown_keys(record, {"consumption", "upstream", "jump"}, field)
    consumption = Consumption.from_dict(record.get("consumption", {}), f"{field}.consumption")
    jump = text(record.get("jump"), f"{field}.jump")
    if jump != END:
        graph.unit(jump, f"{field}.jump")
    allowed = jump in unit.next_units or (jump == END and unit.may_end())
    require(allowed, f"{field}.jump", f"'{unit.name}' does not lead to '{jump}' in the graph")
    upstream = None
    if record.get("upstream") is not None:
        upstream_data = mapping(record["upstream"], f"{field}.upstream")
        no_unknown_keys(upstream_data, {"unit", "consumption"}, f"{field}.upstream")
        upstream_unit = graph.unit(text(upstream_data.get("unit"), f"{field}.upstream.unit"), f"{field}.upstream.unit").name
        upstream_consumption = Consumption.from_dict(upstream_data.get("consumption", {}), f"{field}.upstream.consumption")
        upstream = UnitExecution(upstream_unit, upstream_consumption)
    return Observation(consumption, upstream), jump


def _optional_text(value: object, field: str) -> str:
    return "" if value is None or value == "" else text(value, field)
