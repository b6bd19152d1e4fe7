"""A graph survives the trip to a plain dict (and JSON) with its structure and every record."""

from __future__ import annotations

import json

import pytest
from forethought.demand import END, PDGraph, graph_from_dict, graph_to_dict
from forethought.domain import InvalidField

from .conftest import code_generation_graph, llm_step, tool_step


def recorded_graph() -> PDGraph:
    graph = code_generation_graph()
    graph.record([llm_step("write", 500, 200, 2), tool_step("test", 2.5), llm_step("fix", 800, 120), tool_step("test", 1.0)])
    graph.record([llm_step("write", 300, 100), tool_step("test", 0.5)])
    return graph


def test_a_graph_round_trips_through_json() -> None:
    graph = recorded_graph()
    data = graph_to_dict(graph)
    restored = graph_from_dict(json.loads(json.dumps(data)))
    assert graph_to_dict(restored) == data
    assert restored.entry == "write"
    assert restored.units == graph.units
    assert list(restored.observations("test")) == list(graph.observations("test"))
    assert restored.branch_probabilities("test") == pytest.approx({"fix": 1 / 3, END: 2 / 3})


def test_the_dict_holds_the_declared_prior_and_raw_records() -> None:
    unit = graph_to_dict(recorded_graph())["units"][1]
    assert unit["name"] == "test"
    assert unit["backend"] == {"kind": "tool", "model": "", "lora_adapter": "", "tool": "python-sandbox", "prompt_prefix": ""}
    assert unit["next"] == {"end": 0.5, "fix": 0.5}
    assert unit["records"][0] == {
        "consumption": {"input_tokens": 0, "output_tokens": 0, "parallelism": 1, "tool_duration_s": 2.5},
        "upstream": {
            "unit": "write",
            "consumption": {"input_tokens": 500, "output_tokens": 200, "parallelism": 2, "tool_duration_s": 0.0},
        },
        "jump": "fix",
    }


def test_a_restored_graph_keeps_learning() -> None:
    restored = graph_from_dict(graph_to_dict(recorded_graph()))
    restored.record([llm_step("write"), tool_step("test", 1.0)])
    assert len(restored.observations("test")) == 4


def broken(path: tuple[object, ...], value: object) -> dict[str, object]:
    data = graph_to_dict(recorded_graph())
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


INVALID_DICTS = {
    "not a mapping": (["units"], "graph", "must be a mapping with string keys"),
    "unknown key": ({"name": "a", "units": [], "colour": 1}, "graph.colour", None),
    "no units": ({"name": "a", "units": []}, "units", "must hold at least one unit"),
    "unit kind": (broken(("units", 0, "backend", "kind"), "gpu"), "units.write.backend.kind", "must be one of llm, tool"),
    "negative duration": (
        broken(("units", 1, "records", 0, "consumption", "tool_duration_s"), -2),
        "units.test.records[0].consumption.tool_duration_s",
        "must be >= 0",
    ),
    "tokens as text": (
        broken(("units", 0, "records", 0, "consumption", "input_tokens"), "many"),
        "units.write.records[0].consumption.input_tokens",
        "must be a number",
    ),
    "jump to an unknown unit": (
        broken(("units", 1, "records", 0, "jump"), "deploy"),
        "units.test.records[0].jump",
        "unknown unit 'deploy' in application 'code_generation'",
    ),
    "jump along an undeclared edge": (
        broken(("units", 0, "records", 0, "jump"), "fix"),
        "units.write.records[0].jump",
        "'write' does not lead to 'fix' in the graph",
    ),
    "ending where the unit cannot end": (
        broken(("units", 0, "records", 0, "jump"), "end"),
        "units.write.records[0].jump",
        "'write' does not lead to 'end' in the graph",
    ),
}


@pytest.mark.parametrize("case", INVALID_DICTS.values(), ids=INVALID_DICTS.keys())
def test_a_broken_dict_names_its_field(case) -> None:
    data, field, rule = case
    with pytest.raises(InvalidField) as error:
        graph_from_dict(data)
    assert error.value.field == field
    if rule is not None:
        assert error.value.rule == rule


def test_a_graph_stored_before_prompt_prefixes_existed_loads_with_none():
    from forethought.demand.serialization import backend_from_dict

    assert backend_from_dict({"kind": "llm", "model": "m", "lora_adapter": "", "tool": ""}, "backend").prompt_prefix == ""
    with pytest.raises(InvalidField, match="prompt_prefix"):
        backend_from_dict({"kind": "tool", "tool": "t", "prompt_prefix": "Answer briefly."}, "backend")
