"""Jobs: the graph (self-loops fused, other cycles refused), the requests, and the rules validate_job keeps."""

from __future__ import annotations

from dataclasses import replace

import pytest
from forethought.domain import InvalidField
from forethought.planner import Job, JobRequest, chain_summary_job, ensembling_job, routing_job, validate_job

from .conftest import make_model, make_pool


def two_model_job(**changes: object) -> Job:
    a, b = make_model("a"), make_model("b")
    job = Job((a, b), (JobRequest("a/0", "a", 10), JobRequest("b/0", "b", 10, ("a/0",))), make_pool(),
              (("a", "b"),))
    return replace(job, **changes)


def test_chain_summary_fuses_the_summarizers_self_loop() -> None:
    job = chain_summary_job(make_model("sum"), make_model("eval"), [[100, 50], [80]], make_pool(), evaluations=2)
    validate_job(job)
    assert job.fused == frozenset({"sum"})
    assert job.upstream == {"sum": frozenset(), "eval": frozenset({"sum"})}
    assert job.model_order == ("sum", "eval")
    assert [(r.request_id, r.prompt_tokens, r.inputs) for r in job.requests] == [
        ("doc0/chunk0", 100, ()), ("doc0/chunk1", 50, ("doc0/chunk0",)),
        ("doc0/eval0", 32, ("doc0/chunk1",)), ("doc0/eval1", 32, ("doc0/chunk1",)),
        ("doc1/chunk0", 80, ()), ("doc1/eval0", 32, ("doc1/chunk0",)), ("doc1/eval1", 32, ("doc1/chunk0",)),
    ]


def test_ensembling_and_routing_jobs_have_no_edges() -> None:
    models = (make_model("x"), make_model("y"))
    ensemble = ensembling_job(models, [5, 6], make_pool())
    routed = routing_job(models, {"y": [7]}, make_pool())
    validate_job(ensemble)
    validate_job(routed)
    assert [r.request_id for r in ensemble.requests] == ["x/0", "x/1", "y/0", "y/1"]
    assert [(r.request_id, r.prompt_tokens) for r in routed.requests] == [("y/0", 7)]
    assert ensemble.upstream == {"x": frozenset(), "y": frozenset()}


def test_the_model_order_is_topological_with_ties_in_the_jobs_order() -> None:
    c, a, b = make_model("c"), make_model("a"), make_model("b")
    job = Job((c, a, b), (JobRequest("a/0", "a", 1),), make_pool(), (("a", "c"), ("b", "c")))
    assert job.model_order == ("a", "b", "c")


BROKEN = [
    pytest.param({"models": ()}, "models", "at least one model", id="no-models"),
    pytest.param({"requests": ()}, "requests", "at least one request", id="no-requests"),
    pytest.param({"devices": make_pool(0)}, "devices.count", "must be in 1..72", id="no-devices"),
    pytest.param({"devices": make_pool(10**8)}, "devices.count", "the devices of one node", id="devices-past-a-node"),
    pytest.param({"edges": (("a", "b"), ("b", "a"))}, "edges", "cycle", id="cycle"),
    pytest.param({"edges": (("a", "z"),)}, "edges", "does not hold", id="unknown-edge-model"),
    pytest.param({"edges": ()}, "requests[1].inputs", "no edge a -> b", id="input-without-edge"),
    pytest.param({"requests": (JobRequest("a/0", "a", 10), JobRequest("a/0", "b", 1))}, "requests", "unique",
                 id="duplicate-request"),
    pytest.param({"requests": (JobRequest("q", "nope", 10),)}, "requests[0].model", "not a model", id="unknown-model"),
    pytest.param({"requests": (JobRequest("q", "a", 4096),)}, "requests[0].prompt_tokens", "1..4095",
                 id="prompt-too-long"),
    pytest.param({"requests": (JobRequest("q", "a", 1, ("ghost",)),)}, "requests[0].inputs", "not a request",
                 id="unknown-input"),
    pytest.param({"requests": (JobRequest("q", "a", 1, output_tokens=0),)}, "requests[0].output_tokens", "positive",
                 id="zero-known-length"),
    pytest.param({"models": (make_model("a"), make_model("a"))}, "models", "unique", id="duplicate-model"),
]


@pytest.mark.parametrize(("changes", "field", "rule"), BROKEN)
def test_validate_job_names_the_field_and_the_rule(changes: dict[str, object], field: str, rule: str) -> None:
    with pytest.raises(InvalidField) as raised:
        validate_job(two_model_job(**changes))
    assert raised.value.field == field
    assert rule in raised.value.rule


def test_a_request_cycle_inside_a_fused_model_is_refused() -> None:
    a = make_model("a")
    requests = (JobRequest("x", "a", 1, ("y",)), JobRequest("y", "a", 1, ("x",)))
    with pytest.raises(InvalidField, match="requests.inputs: must not form a cycle"):
        validate_job(Job((a,), requests, make_pool(), (("a", "a"),)))


def test_a_model_no_device_set_can_hold_is_refused() -> None:
    big = make_model("big", "70b")
    with pytest.raises(InvalidField) as raised:
        validate_job(Job((big,), (JobRequest("q", "big", 10),), make_pool(1)))
    assert raised.value.field == "models[big]"
    assert raised.value.rule == ("needs 142.5 GB (weights and one 4096-token sequence's KV cache); "
                                 "the job's 1 devices hold 72.0 GB together")
