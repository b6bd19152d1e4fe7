"""PDGraph: validation names the field and rule; records are bounded FIFO; branches follow frequencies."""

from __future__ import annotations

import pytest
from forethought.demand import END, BackendKind, BackendSpec, Consumption, PDGraph, UnitExecution
from forethought.domain import InvalidField

from .conftest import LLM, SANDBOX, code_generation_graph, llm_step, make_unit, tool_step

INVALID_GRAPHS = {
    "empty": (lambda: PDGraph("app", []), "units", "must hold at least one unit"),
    "no name": (lambda: PDGraph("", [make_unit("a")]), "name", "must be a non-empty string"),
    "defined twice": (lambda: PDGraph("app", [make_unit("a"), make_unit("a")]), "units.a", "is defined twice"),
    "reserved name": (lambda: PDGraph("app", [make_unit("end")]), "units.end", "'end' is reserved for the end of a run"),
    "unknown entry": (lambda: PDGraph("app", [make_unit("a")], entry="b"), "entry", "unknown unit 'b'"),
    "unknown successor": (lambda: PDGraph("app", [make_unit("a", {"b": 1.0})]), "units.a.next.b", "unknown unit"),
    "probability above one": (
        lambda: PDGraph("app", [make_unit("a", {"end": 1.5})]),
        "units.a.next.end",
        "must be a probability in (0, 1]",
    ),
    "zero probability": (
        lambda: PDGraph("app", [make_unit("a", {"end": 1.0, "a": 0.0})]),
        "units.a.next.a",
        "must be a probability in (0, 1]",
    ),
    "probabilities short of one": (
        lambda: PDGraph("app", [make_unit("a", {"end": 0.5, "a": 0.4})]),
        "units.a.next",
        "probabilities sum to 0.9, not 1",
    ),
    "loop without exit": (
        lambda: PDGraph("app", [make_unit("a", {"b": 1.0}), make_unit("b", {"c": 1.0}), make_unit("c", {"b": 1.0})]),
        "units.a.next",
        "never reaches 'end': a run entering it loops forever among a, b, c",
    ),
    "self-loop without exit": (
        lambda: PDGraph("app", [make_unit("a", {"b": 1.0}), make_unit("b", {"b": 1.0})]),
        "units.a.next",
        "never reaches 'end': a run entering it loops forever among a, b",
    ),
    "llm without model": (
        lambda: PDGraph("app", [make_unit("a", backend=BackendSpec(BackendKind.LLM))]),
        "units.a.backend.model",
        "is required for an llm unit",
    ),
    "tool without kind": (
        lambda: PDGraph("app", [make_unit("a", backend=BackendSpec(BackendKind.TOOL))]),
        "units.a.backend.tool",
        "is required for a tool unit",
    ),
    "tool with adapter": (
        lambda: PDGraph("app", [make_unit("a", backend=BackendSpec(BackendKind.TOOL, tool="t", lora_adapter="x"))]),
        "units.a.backend.lora_adapter",
        "is only for an llm unit",
    ),
}


@pytest.mark.parametrize("case", INVALID_GRAPHS.values(), ids=INVALID_GRAPHS.keys())
def test_an_invalid_graph_names_its_field_and_rule(case) -> None:
    build, field, rule = case
    with pytest.raises(InvalidField) as error:
        build()
    assert (error.value.field, error.value.rule) == (field, rule)


def test_loops_that_can_exit_are_allowed() -> None:
    self_loop = PDGraph("react", [make_unit("reason", {"reason": 0.6, "end": 0.4})])
    assert self_loop.branch_probabilities("reason") == {"reason": 0.6, "end": 0.4}
    assert code_generation_graph().units["fix"].successors == ("test",)


def test_the_entry_is_the_first_unit_unless_named() -> None:
    assert code_generation_graph().entry == "write"
    assert PDGraph("app", [make_unit("a", {"b": 1.0}), make_unit("b")], entry="b").entry == "b"


def test_a_unit_without_successors_always_ends() -> None:
    graph = PDGraph("app", [make_unit("only")])
    assert graph.branch_probabilities("only") == {END: 1.0}


def test_record_keeps_each_execution_with_its_upstream(graph: PDGraph) -> None:
    run = [llm_step("write", 500, 200), tool_step("test", 2.0), llm_step("fix", 700, 150), tool_step("test", 1.5)]
    graph.record(run)
    assert [(o.consumption.tool_duration_s, o.upstream) for o in graph.observations("test")] == [
        (2.0, run[0]),
        (1.5, run[2]),
    ]
    assert graph.observations("write")[0].upstream is None
    assert graph.profiles["test"].jumps == ("fix", END)
    assert graph.version == 1


def test_branch_probabilities_are_observed_frequencies_once_recorded(graph: PDGraph) -> None:
    assert graph.branch_probabilities("test") == {"end": 0.5, "fix": 0.5}
    graph.record([llm_step("write"), tool_step("test", 1.0)])
    assert graph.branch_probabilities("test") == {END: 1.0}
    graph.record([llm_step("write"), tool_step("test", 1.0), llm_step("fix"), tool_step("test", 1.0)])
    graph.record([llm_step("write"), tool_step("test", 1.0)])
    assert graph.branch_probabilities("test") == {END: 0.75, "fix": 0.25}


def test_records_keep_the_newest_max_recorded_values() -> None:
    graph = PDGraph("app", [make_unit("a", {"a": 0.5, "end": 0.5})], max_recorded=3)
    graph.record([llm_step("a", 1), llm_step("a", 2), llm_step("a", 3)])
    graph.record([llm_step("a", 4)])
    assert [o.consumption.input_tokens for o in graph.observations("a")] == [2, 3, 4]
    assert graph.profiles["a"].jumps == ("a", END, END)
    assert graph.branch_probabilities("a") == pytest.approx({"a": 1 / 3, END: 2 / 3})


def test_the_default_bound_is_a_thousand_values_per_unit() -> None:
    graph = PDGraph("app", [make_unit("a")])
    for tokens in range(1005):
        graph.record([llm_step("a", tokens)])
    inputs = [o.consumption.input_tokens for o in graph.observations("a")]
    assert (len(inputs), inputs[0], inputs[-1]) == (1000, 5, 1004)


INVALID_RUNS = {
    "empty": ([], "run", "must hold at least one step"),
    "not from the entry": ([tool_step("test", 1.0)], "run[0].unit", "must be the entry unit 'write'"),
    "unknown unit": (
        [llm_step("write"), llm_step("deploy")],
        "run[1].unit",
        "unknown unit 'deploy' in application 'code_generation'",
    ),
    "undeclared edge": ([llm_step("write"), llm_step("fix")], "run[1].unit", "'fix' does not follow 'write' in the graph"),
    "cannot end there": ([llm_step("write")], "run[0].unit", "'write' cannot end a run"),
    "negative duration": ([llm_step("write"), tool_step("test", -1.0)], "run[1].tool_duration_s", "must be >= 0"),
    "negative tokens": ([llm_step("write", input_tokens=-1), tool_step("test", 1.0)], "run[0].input_tokens", "must be >= 0"),
    "no parallel request": (
        [UnitExecution("write", Consumption(parallelism=0)), tool_step("test", 1.0)],
        "run[0].parallelism",
        "must be >= 1",
    ),
}


@pytest.mark.parametrize("case", INVALID_RUNS.values(), ids=INVALID_RUNS.keys())
def test_an_invalid_run_is_refused_whole(graph: PDGraph, case) -> None:
    run, field, rule = case
    with pytest.raises(InvalidField) as error:
        graph.record(run)
    assert (error.value.field, error.value.rule) == (field, rule)
    assert all(len(graph.observations(name)) == 0 for name in graph.units)
    assert graph.version == 0


def test_an_unknown_unit_is_named_on_lookup(graph: PDGraph) -> None:
    with pytest.raises(InvalidField, match="unit: unknown unit 'deploy'"):
        graph.branch_probabilities("deploy")


def test_backends_of_both_kinds_validate() -> None:
    LLM.validate("backend")
    SANDBOX.validate("backend")
    BackendSpec(BackendKind.LLM, model="llama-2-7b", lora_adapter="sql-lora").validate("backend")
