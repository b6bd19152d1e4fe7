"""Job files: each graph kind read into its requests, generated lengths from the seed, length sources resolved
lazily, the examples read and planned, and every broken rule named by its field."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import random
from pathlib import Path
from typing import Any

import pytest
from forethought.costmodel.registry import A100_80GB, LLAMA_13B
from forethought.domain import InvalidField
from forethought.planner import OutputLengthCDF
from forethought.planner.job_file import (
    JobFile,
    LengthSource,
    job_file_from_dict,
    load_job_file,
    plan_job,
    resolve_cdfs,
)

from .conftest import CountingClock

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "jobs"


def make_data(**graph: Any) -> dict[str, Any]:
    """Two 7B models on 4 A100s with listed output lengths; ``graph`` replaces the ensembling graph."""
    return {
        "name": "t", "seed": 5,
        "devices": {"hardware": "A100-80GB", "count": 4},
        "models": [
            {"name": "a", "spec": "Llama-2-7B", "max_output_tokens": 64, "output_lengths": [10, 20, 30]},
            {"name": "b", "spec": "Llama-2-13B", "output_lengths": {"castillo": "some-model"}},
        ],
        "graph": graph or {"kind": "ensembling", "prompts": {"input_tokens": [100, 200, 300]}},
    }


def test_ensembling_gives_every_model_every_prompt() -> None:
    job_file = job_file_from_dict(make_data())
    assert [(r.request_id, r.model, r.prompt_tokens) for r in job_file.job.requests] == [
        ("a/0", "a", 100), ("a/1", "a", 200), ("a/2", "a", 300), ("b/0", "b", 100), ("b/1", "b", 200), ("b/2", "b", 300)]
    assert job_file.job.model_by_name["b"].spec == LLAMA_13B
    assert job_file.job.model_by_name["b"].hidden_size == 5120
    assert job_file.job.model_by_name["a"].max_output_tokens == 64
    assert job_file.job.devices.hardware == A100_80GB and job_file.job.devices.count == 4
    assert job_file.hardware == "A100-80GB" and job_file.seed == 5 and job_file.name == "t"
    assert job_file.lengths == {"a": LengthSource(observed=(10, 20, 30)), "b": LengthSource(castillo_model="some-model")}


def test_generated_prompt_lengths_come_from_the_seed() -> None:
    data = make_data(kind="ensembling", prompts={"count": 4, "input_tokens": {"min": 10, "max": 20}})
    first = job_file_from_dict(data).job.requests
    draws = random.Random(5)
    expected = [draws.randint(10, 20) for _ in range(4)]
    assert [r.prompt_tokens for r in first] == expected * 2
    assert job_file_from_dict(copy.deepcopy(data)).job.requests == first
    data["seed"] = 6
    assert job_file_from_dict(data).job.requests != first


def test_routing_gives_each_model_its_own_prompts() -> None:
    job = job_file_from_dict(make_data(kind="routing", routed={"b": {"input_tokens": [7, 8]}, "a": {"input_tokens": [9]}})).job
    assert [(r.request_id, r.prompt_tokens) for r in job.requests] == [("a/0", 9), ("b/0", 7), ("b/1", 8)]


def test_a_chain_summary_cuts_generated_documents_into_chunks() -> None:
    data = make_data(kind="chain_summary", summarizer="a", evaluator="b", evaluations=2, instruction_tokens=10,
                     documents={"count": 2, "tokens": {"min": 5000, "max": 5000}, "chunk_tokens": 2048})
    job = job_file_from_dict(data).job
    chunks = [(r.request_id, r.prompt_tokens, r.inputs) for r in job.requests if r.model == "a"]
    assert chunks[:3] == [("doc0/chunk0", 2058, ()), ("doc0/chunk1", 2058, ("doc0/chunk0",)),
                          ("doc0/chunk2", 914, ("doc0/chunk1",))]
    assert len(chunks) == 6
    evaluations = [(r.request_id, r.inputs) for r in job.requests if r.model == "b"]
    assert evaluations[:2] == [("doc0/eval0", ("doc0/chunk2",)), ("doc0/eval1", ("doc0/chunk2",))]
    assert job.edges == (("a", "a"), ("a", "b")) and job.fused == frozenset({"a"})


def test_listed_documents_and_explicit_requests() -> None:
    listed = make_data(kind="chain_summary", summarizer="a", evaluator="b", documents=[[100, 50], [70]])
    assert [r.prompt_tokens for r in job_file_from_dict(listed).job.requests] == [100, 50, 32, 70, 32]
    explicit = make_data(kind="explicit", edges=[["a", "b"]], requests=[
        {"id": "x", "model": "a", "prompt_tokens": 12, "output_tokens": 40},
        {"id": "y", "model": "b", "prompt_tokens": 5, "inputs": ["x"]}])
    job = job_file_from_dict(explicit).job
    assert [(r.request_id, r.inputs, r.output_tokens) for r in job.requests] == [("x", (), 40), ("y", ("x",), None)]
    assert job.upstream["b"] == frozenset({"a"})


def test_a_model_given_by_its_shape() -> None:
    data = make_data()
    data["models"][0] = {"name": "a", "shape": {"params": 3e9, "layers": 28, "kv_heads": 8, "head_dim": 128,
                                                "hidden_size": 3072, "bytes_per_param": 1}, "output_lengths": [5]}
    model = job_file_from_dict(data).job.model_by_name["a"]
    assert (model.spec.name, model.spec.params, model.spec.layers, model.spec.bytes_per_param, model.hidden_size) == (
        "a", 3e9, 28, 1, 3072)
    assert model.max_seq_len == 4096 and model.max_output_tokens is None


def with_change(path: str, value: Any) -> dict[str, Any]:
    """``make_data()`` with the value at a dotted path (list indices as numbers) set, or removed for None."""
    data = make_data()
    *parents, last = [int(part) if part.isdigit() else part for part in path.split(".")]
    target: Any = data
    for part in parents:
        target = target[part]
    if value is None:
        del target[last]
    else:
        target[last] = value
    return data


BROKEN = [
    ("unknown top-level key", with_change("devices_count", 4), "job.devices_count"),
    ("unknown hardware", with_change("devices.hardware", "TPU"), "devices.hardware"),
    ("no devices", with_change("devices.count", 0), "devices.count"),
    ("more devices than a node holds", with_change("devices.count", 73), "devices.count"),
    ("no models", with_change("models", []), "models"),
    ("unknown spec", with_change("models.0.spec", "GPT-5"), "models[0].spec"),
    ("spec and shape", with_change("models.0.shape", {"params": 1}), "models[0]"),
    ("a shape missing a number", with_change("models.1", {"name": "b", "shape": {"params": 1e9}, "output_lengths": [3]}),
     "models[1].shape.head_dim"),
    ("a negative observed length", with_change("models.0.output_lengths", [5, -1]), "models[0].output_lengths"),
    ("a length source of another kind", with_change("models.0.output_lengths", {"file": "x"}),
     "models[0].output_lengths.file"),
    ("no output lengths", with_change("models.0.output_lengths", None), "models[a].output_lengths"),
    ("unknown graph kind", with_change("graph.kind", "tree"), "graph.kind"),
    ("a count beside a list", with_change("graph.prompts.count", 3), "graph.prompts.count"),
    ("an empty range", with_change("graph.prompts", {"count": 2, "input_tokens": {"min": 9, "max": 3}}), "graph.prompts.input_tokens.max"),
    ("a prompt past max_seq_len", with_change("graph.prompts.input_tokens", [5000]), "requests[0].prompt_tokens"),
    ("a model too large for the devices", with_change("devices.count", 1) | {"models": [
        {"name": "a", "spec": "Llama-3-70B", "output_lengths": [5]}]}, "models[a]"),
]


@pytest.mark.parametrize(("data", "field"), [(data, field) for _, data, field in BROKEN], ids=[case[0] for case in BROKEN])
def test_a_broken_rule_names_its_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidField) as raised:
        job_file_from_dict(data)
    assert raised.value.field == field


@pytest.mark.parametrize(("graph", "field"), [
    ({"kind": "routing", "routed": {"c": {"input_tokens": [3]}}}, "graph.routed.c"),
    ({"kind": "chain_summary", "summarizer": "a", "evaluator": "a", "documents": [[3]]}, "models"),
    ({"kind": "chain_summary", "summarizer": "z", "evaluator": "a", "documents": [[3]]}, "graph.summarizer"),
    ({"kind": "explicit", "edges": [["a", "b", "c"]], "requests": []}, "graph.edges[0]"),
    ({"kind": "explicit", "requests": [{"id": "x", "model": "a", "prompt_tokens": 3, "inputs": ["nope"]}]},
     "requests[0].inputs"),
    ({"kind": "explicit", "edges": [["a", "b"], ["b", "a"]], "requests": [{"id": "x", "model": "a", "prompt_tokens": 3}]},
     "edges"),
], ids=["routed to an unknown model", "one model in both roles", "unknown summarizer", "an edge of three",
        "an unknown input", "a cycle between models"])
def test_a_broken_graph_names_its_field(graph: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidField) as raised:
        job_file_from_dict(make_data(**graph))
    assert raised.value.field == field


def test_files_name_the_path_when_they_do_not_parse(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("models: [unclosed\n")
    with pytest.raises(InvalidField) as raised:
        load_job_file(broken)
    assert raised.value.field == "path" and "broken.yaml" in raised.value.rule
    with pytest.raises(InvalidField) as raised:
        load_job_file(tmp_path / "job.txt")
    assert raised.value.field == "path"


def test_castillo_is_read_once_and_only_when_named() -> None:
    job_file = job_file_from_dict(make_data())
    calls = []

    def castillo() -> dict[str, OutputLengthCDF]:
        calls.append(1)
        return {"some-model": OutputLengthCDF.from_observations([7, 9])}

    cdfs = resolve_cdfs(job_file, castillo)
    assert cdfs["a"].lengths == (10, 20, 30) and cdfs["b"].lengths == (7, 9) and calls == [1]
    listed = job_file_from_dict(with_change("models.1.output_lengths", [4]))
    assert resolve_cdfs(listed, None)["b"].lengths == (4,)
    with pytest.raises(InvalidField) as raised:
        resolve_cdfs(job_file, lambda: {"other": OutputLengthCDF.from_observations([1])})
    assert raised.value.field == "models[b].output_lengths.castillo" and "(known: other)" in raised.value.rule
    with pytest.raises(InvalidField) as raised:
        resolve_cdfs(job_file, None)
    assert raised.value.field == "models[b].output_lengths.castillo"


@pytest.mark.parametrize("name", ["ensembling", "routing", "chain_summary", "chain_summary_small"])
def test_the_examples_read(name: str) -> None:
    job_file = load_job_file(EXAMPLES / f"{name}.yaml")
    assert job_file.name == name and len(job_file.job.requests) >= 9
    assert set(job_file.lengths) == {model.name for model in job_file.job.models}


def test_a_job_file_plans_with_both_heuristics_on_the_same_work() -> None:
    data = make_data(kind="ensembling", prompts={"count": 6, "input_tokens": {"min": 20, "max": 200}})
    data["models"][1]["output_lengths"] = [15, 25, 35]
    job_file: JobFile = job_file_from_dict(data)
    cdfs = resolve_cdfs(job_file)
    plans = plan_job(job_file, cdfs, CountingClock())
    assert plans.max_heuristic is not None and plans.min_heuristic is not None
    for plan in (plans.samullm, plans.max_heuristic, plans.min_heuristic):
        assert sorted(itertools.chain.from_iterable(stage.finished_models for stage in plan.stages)) == ["a", "b"]
    assert plans.samullm.inference_s <= max(plans.max_heuristic.inference_s, plans.min_heuristic.inference_s)
    assert plan_job(job_file, cdfs, CountingClock()).samullm.stages == plans.samullm.stages
    alone = plan_job(job_file, cdfs, CountingClock(), baselines=False)
    assert alone.max_heuristic is None and alone.samullm.stages == plans.samullm.stages


def test_plan_job_validates_a_job_built_elsewhere() -> None:
    job_file = job_file_from_dict(with_change("models.1.output_lengths", [4]))
    broken = JobFile("t", dataclasses.replace(job_file.job, edges=(("a", "ghost"),)), job_file.lengths, "A100-80GB")
    with pytest.raises(InvalidField) as raised:
        plan_job(broken, resolve_cdfs(broken), CountingClock())
    assert raised.value.field == "edges"
