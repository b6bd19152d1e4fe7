"""Application files: every example loads into a profiled graph; a broken file names the field at fault."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from forethought.demand import (
    DemandEstimator,
    DemandVariable,
    PDGraph,
    PerTokenSeconds,
    RecordFilter,
    RunPosition,
    application_from_dict,
    gittins_rank,
    graph_to_dict,
    load_application,
    prewarm_decisions,
)
from forethought.domain import InvalidField

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples" / "applications").glob("*.yaml"))
SIZE = {  # Hermes section 5.1: small under a minute, medium 1 to 10 minutes, large over 10 minutes
    "equation_verification": "small",
    "react_fact_verification": "small",
    "kbqa_verification": "small",
    "code_generation": "medium",
    "plan_and_execute": "medium",
    "document_merging": "large",
    "mapreduce_summarization": "large",
}
# LLaMA-2-7B-like per-token times: 0.2 ms a prompt token, 20 ms an output token.
PER_TOKEN = PerTokenSeconds(prefill_s=0.0002, decode_s=0.02)


def reachable(graph: PDGraph) -> set[str]:
    seen, frontier = {graph.entry}, [graph.entry]
    while frontier:
        for following in graph.units[frontier.pop()].successors:
            if following not in seen:
                seen.add(following)
                frontier.append(following)
    return seen


def test_the_paper_application_types_are_all_there() -> None:
    assert {path.stem for path in EXAMPLES} == set(SIZE)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_an_example_loads_into_a_profiled_graph(path: Path) -> None:
    graph = load_application(path)
    assert graph.name == path.stem
    assert reachable(graph) == set(graph.units)
    assert all(len(graph.observations(name)) > 0 for name in graph.units)
    assert sum(1 for record in graph.observations(graph.entry) if record.upstream is None) == 200  # one per run
    estimate = DemandEstimator(graph, PER_TOKEN, walks=200).estimate(RunPosition(graph.entry), random.Random(0))
    assert 0 < gittins_rank(estimate, attained_s=0.0) <= estimate.worst_s
    decisions = prewarm_decisions(
        DemandEstimator(graph, PER_TOKEN), RunPosition(graph.entry), 0.0, lambda backend: True, lambda backend: 5.0
    )
    assert {d.unit for d in decisions} == set(graph.units[graph.entry].successors)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_an_example_says_where_its_numbers_come_from(path: Path) -> None:
    text = path.read_text()
    assert "Hermes" in text and "sources:" in text and "Assumed, not from the paper" in text


def test_large_applications_dwarf_the_others() -> None:
    mean = {}
    for path in EXAMPLES:
        graph = load_application(path)
        estimator = DemandEstimator(graph, PER_TOKEN, walks=500)
        mean[path.stem] = estimator.estimate(RunPosition(graph.entry), random.Random(0)).mean_s
    large = [mean[name] for name, size in SIZE.items() if size == "large"]
    others = [mean[name] for name, size in SIZE.items() if size != "large"]
    assert min(large) > 5 * max(others)


def test_loading_is_deterministic_by_seed() -> None:
    path = EXAMPLES[0]
    assert graph_to_dict(load_application(path)) == graph_to_dict(load_application(path))
    assert graph_to_dict(load_application(path, random.Random(99))) != graph_to_dict(load_application(path))


def test_a_declared_correlation_is_found_by_the_refinement() -> None:
    # document_merging: a scoring prompt holds the aggregate's output (Hermes 3.2).
    graph = load_application(next(path for path in EXAMPLES if path.stem == "document_merging"))
    refined = RecordFilter(list(graph.observations("score_aggregate")), "aggregate")
    assert refined.upstream_sources == [DemandVariable.OUTPUT]


MINIMAL = {
    "name": "lookup",
    "profiling_runs": 20,
    "units": {
        "ask": {
            "backend": {"kind": "llm", "model": "Llama-2-7B"},
            "next": {"search": 1.0},
            "profile": {"input_tokens": 500, "output_tokens": [10, 20, 30]},
        },
        "search": {
            "backend": {"kind": "tool", "tool": "web-search"},
            "next": {"ask": 0.25, "end": 0.75},
            "profile": {"tool_duration_s": {"uniform": [1.0, 2.0]}, "parallelism": {"follows": "upstream.output_tokens", "scale": 0.1}},
        },
    },
}


def test_a_json_file_loads_like_yaml(tmp_path: Path) -> None:
    path = tmp_path / "lookup.json"
    path.write_text(json.dumps(MINIMAL))
    graph = load_application(path)
    asks = [o.consumption for o in graph.observations("ask")]
    assert {c.input_tokens for c in asks} == {500} and {c.output_tokens for c in asks} <= {10, 20, 30}
    for record in graph.observations("search"):
        assert record.upstream is not None
        assert record.consumption.parallelism == round(record.upstream.consumption.output_tokens * 0.1)
        assert 1.0 <= record.consumption.tool_duration_s <= 2.0


def edited(path: tuple[str, ...], value: object) -> dict[str, object]:
    data = json.loads(json.dumps(MINIMAL))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


ASK_PROFILE = ("units", "ask", "profile")
INVALID_FILES = {
    "no units": ({"name": "x", "units": {}}, "units", "must hold at least one unit"),
    "unknown key": (edited(("colour",), "red"), "application.colour", None),
    "unknown unit key": (edited(("units", "ask", "model"), "x"), "units.ask.model", None),
    "unknown variable": (edited((*ASK_PROFILE, "latency"), 3), "units.ask.profile.latency", None),
    "negative constant": (edited((*ASK_PROFILE, "input_tokens"), -5), "units.ask.profile.input_tokens", "must be >= 0"),
    "two shapes": (
        edited((*ASK_PROFILE, "input_tokens"), {"uniform": [1, 2], "lognormal": {"median": 3, "sigma": 1}}),
        "units.ask.profile.input_tokens",
        "needs exactly one of lognormal, normal, uniform, follows",
    ),
    "uniform upside down": (
        edited((*ASK_PROFILE, "input_tokens"), {"uniform": [5, 1]}),
        "units.ask.profile.input_tokens.uniform",
        "must be [low, high], 0 <= low <= high",
    ),
    "min above max": (
        edited((*ASK_PROFILE, "input_tokens"), {"uniform": [1, 5], "min": 9, "max": 3}),
        "units.ask.profile.input_tokens.min",
        "must be >= 0 and <= max",
    ),
    "follows a later variable": (
        edited((*ASK_PROFILE, "input_tokens"), {"follows": "output_tokens"}),
        "units.ask.profile.input_tokens.follows",
        "must be upstream.<variable> or one of ['parallelism']",
    ),
    "entry follows upstream": (
        edited((*ASK_PROFILE, "input_tokens"), {"follows": "upstream.output_tokens"}),
        "units.ask.profile.input_tokens.follows",
        "the entry unit has no unit before it in a run",
    ),
    "negative duration": (
        edited(("units", "search", "profile", "tool_duration_s"), -1.0),
        "units.search.profile.tool_duration_s",
        "must be >= 0",
    ),
    "loop without exit": (
        edited(("units", "search", "next"), {"ask": 1.0}),
        "units.ask.next",
        "never reaches 'end': a run entering it loops forever among ask, search",
    ),
    "unknown successor": (edited(("units", "search", "next"), {"deploy": 1.0}), "units.search.next.deploy", "unknown unit"),
    # checked before any run is drawn: 100 million runs stalled `forethought app run` checking the file
    "too many profiling runs": (edited(("profiling_runs",), 10**8), "profiling_runs", "must be in 0..10000"),
}


@pytest.mark.parametrize("case", INVALID_FILES.values(), ids=INVALID_FILES.keys())
def test_a_broken_file_names_its_field(case) -> None:
    data, field, rule = case
    with pytest.raises(InvalidField) as error:
        application_from_dict(data)
    assert error.value.field == field
    if rule is not None:
        assert error.value.rule == rule


def test_an_unknown_suffix_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.toml"
    path.write_text("")
    with pytest.raises(InvalidField, match="path: app.toml: must end in .yaml, .yml or .json"):
        load_application(path)


def test_a_file_that_is_not_text_is_named(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_bytes(b"units:\n  - \xff\xfe\x00")
    with pytest.raises(InvalidField, match=r"^path: app.yaml: not UTF-8 text \(invalid start byte at byte 11\)$"):
        load_application(path)


@pytest.mark.parametrize(("name", "content"), [("app.json", "{units: 1"), ("app.yaml", "units: [a, b")])
def test_a_file_that_does_not_parse_is_named(tmp_path: Path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(InvalidField, match=f"^path: {name}: not valid (JSON|YAML): "):
        load_application(path)
