"""The run state machine: stages placed as planned, the dynamic adjustment when models finish out of order
(SamuLLM 4.3), ready requests along the inputs, replicas on workers, prompts and progress."""

from __future__ import annotations

import pytest
from forethought.planner import ExecutionPlan, Job, JobRequest, Stage
from forethought.planner.running import JobRun, StalledRun, assign_replicas, max_tokens_of, prompt_token_ids

from tests.unit.planner.conftest import make_model, make_pool

P1, P2, P4 = ExecutionPlan(1, 1), ExecutionPlan(1, 2), ExecutionPlan(1, 4)


def make_job(models: str = "abcd", per_model: int = 2, edges: tuple[tuple[str, str], ...] = ()) -> Job:
    requests = tuple(JobRequest(f"{m}{i}", m, 10) for m in models for i in range(per_model))
    return Job(tuple(make_model(m, max_output_tokens=50) for m in models), requests, make_pool(4), edges)


def stage(*pairs: tuple[str, ExecutionPlan], duration: float = 10.0, start: float = 0.0) -> Stage:
    return Stage(tuple(pairs), start, duration, 1.0, (pairs[0][0],))


def finish_model(run: JobRun, model: str, now: float) -> JobRun:
    for request in run.job.requests:
        if request.model == model:
            run = run.with_finished(request.request_id, now)
    return run


def test_the_first_call_places_the_first_stage():
    run = JobRun(make_job(), (stage(("a", P2), ("b", P2)), stage(("c", P4))))
    run, placement = run.schedule(0.0)
    assert dict(run.running) == {"a": P2, "b": P2} and placement.start == (("a", P2), ("b", P2))
    assert placement.stop == () and run.pointer == 0 and run.stage_started_s == (0.0,)


def test_the_planned_order_moves_to_the_next_stage_keeping_a_same_plan_model():
    stages = (stage(("a", P2), ("b", P2)), stage(("b", P2), ("c", P2)), stage(("c", P2), ("d", P2)))
    run, _ = JobRun(make_job(), stages).schedule(0.0)
    run, placement = finish_model(run, "a", 7.0).schedule(7.0)
    assert run.pointer == 1 and dict(run.running) == {"b": P2, "c": P2}
    assert placement.start == (("c", P2),) and placement.stop == ("a",)
    assert run.stage_started_s == (0.0, 7.0)


def test_an_unexpected_first_finisher_gives_the_next_stage_the_devices_first():
    # Planned: a finishes first and b goes on with 2 devices in stage 2. b finishes first instead.
    stages = (stage(("a", P2), ("b", P2)), stage(("b", P2), ("c", P2)), stage(("a", P2), ("d", P2)))
    run, _ = JobRun(make_job(), stages).schedule(0.0)
    run, placement = finish_model(run, "b", 3.0).schedule(3.0)
    # a is in a later stage with its plan, not in stage 2: stage 2's c goes first, a keeps the 2 devices left.
    assert run.pointer == 1 and dict(run.running) == {"a": P2, "c": P2}
    assert placement.start == (("c", P2),) and placement.stop == ("b",)


def test_a_yielding_model_is_stopped_when_the_next_stage_needs_its_devices():
    stages = (stage(("a", P2), ("b", P2)), stage(("b", P2), ("c", P4)), stage(("a", P2),))
    run, _ = JobRun(make_job("abc"), stages).schedule(0.0)
    run, placement = finish_model(run, "b", 3.0).schedule(3.0)
    # a waits for stage 3; stage 2's c takes all 4 devices, so a is stopped and its requests wait.
    assert run.pointer == 1 and dict(run.running) == {"c": P4}
    assert placement.start == (("c", P4),) and set(placement.stop) == {"a", "b"}
    assert run.ready_requests(frozenset()) == tuple(r for r in run.job.requests if r.model == "c")
    run, _ = run.with_finished("c0", 4.0).schedule(4.0)  # not a model's finish: no stage boundary
    assert run.pointer == 1
    run, placement = finish_model(run, "c", 6.0).schedule(6.0)
    assert run.pointer == 2 and dict(run.running) == {"a": P2} and placement.start == (("a", P2),)


def test_a_model_whose_last_stage_passed_runs_to_its_end_and_the_next_pair_waits_for_devices():
    stages = (stage(("a", P2), ("b", P2)), stage(("c", P4),))
    run, _ = JobRun(make_job("abc"), stages).schedule(0.0)
    run, placement = finish_model(run, "b", 3.0).schedule(3.0)
    # a is in no later stage: it keeps its 2 devices; c needs 4 and waits.
    assert run.pointer == 1 and dict(run.running) == {"a": P2} and placement == placement.__class__((), ("b",))
    run, placement = finish_model(run, "a", 5.0).schedule(5.0)
    assert dict(run.running) == {"c": P4} and placement.start == (("c", P4),) and run.pointer == 1
    run, placement = finish_model(run, "c", 9.0).schedule(9.0)
    assert run.is_done and dict(run.running) == {} and placement.stop == ("c",) and run.ended_s == 9.0


def test_a_new_plan_for_a_running_model_restarts_it():
    stages = (stage(("a", P2), ("b", P2)), stage(("a", P4),))
    run, _ = JobRun(make_job("ab"), stages).schedule(0.0)
    run, placement = finish_model(run, "b", 2.0).schedule(2.0)
    assert dict(run.running) == {"a": P4} and placement.start == (("a", P4),) and set(placement.stop) == {"a", "b"}


def test_stages_of_finished_models_are_passed_over():
    stages = (stage(("a", P2), ("b", P2)), stage(("b", P4),), stage(("c", P4),))
    run, _ = JobRun(make_job("abc"), stages).schedule(0.0)
    run = finish_model(finish_model(run, "a", 4.0), "b", 4.0)
    run, placement = run.schedule(4.0)
    assert run.pointer == 2 and dict(run.running) == {"c": P4} and run.stage_started_s == (0.0, 4.0, 4.0)
    assert run.stage_times(6.0) == ((10.0, 4.0), (10.0, 0.0), (10.0, 2.0))


def test_models_running_past_the_last_stage_count_in_its_time():
    stages = (stage(("a", P2), ("b", P2)), stage(("a", P4),))
    run, _ = JobRun(make_job("ab"), stages).schedule(0.0)
    run, _ = finish_model(run, "a", 3.0).schedule(3.0)  # stage 2 holds a alone: passed over
    assert run.pointer == 2 and dict(run.running) == {"b": P2}
    assert run.stage_times(5.0) == ((10.0, 3.0), (10.0, 2.0))


def test_a_plan_that_leaves_a_model_out_stalls():
    run, _ = JobRun(make_job("ab"), (stage(("a", P2),),)).schedule(0.0)
    with pytest.raises(StalledRun, match="unfinished: b"):
        finish_model(run, "a", 1.0).schedule(1.0)


def test_ready_requests_follow_inputs_and_running_models():
    job = Job((make_model("s"), make_model("e")),
              (JobRequest("c0", "s", 10), JobRequest("c1", "s", 10, ("c0",)), JobRequest("e0", "e", 5, ("c1",))),
              make_pool(4), (("s", "s"), ("s", "e")))
    run, _ = JobRun(job, (stage(("s", P2), ("e", P2)),)).schedule(0.0)
    assert [r.request_id for r in run.ready_requests(frozenset())] == ["c0"]
    assert run.ready_requests(frozenset({"c0"})) == ()
    run = run.with_finished("c0", 1.0)
    assert [r.request_id for r in run.ready_requests(frozenset())] == ["c1"]
    run = run.with_finished("c1", 2.0)
    assert [r.request_id for r in run.ready_requests(frozenset())] == ["e0"]


def test_a_prompt_carries_its_inputs_outputs_and_keeps_its_tail():
    request = JobRequest("c1", "s", 4, ("c0", "x"))
    ids = prompt_token_ids(request, {"c0": [1, 2], "x": [3]})
    assert len(ids) == 7 and ids[4:] == [1, 2, 3]
    assert ids[:4] == prompt_token_ids(JobRequest("c1", "s", 4), {})  # the same own tokens in every run
    assert prompt_token_ids(request, {"c0": [1, 2], "x": [3]}, limit=2) == [2, 3]


def test_max_tokens_takes_the_known_length_then_the_models_limit_then_the_cap():
    job = make_job("a")
    assert max_tokens_of(job, JobRequest("r", "a", 10, (), 7)) == 7
    assert max_tokens_of(job, JobRequest("r", "a", 10)) == 50
    assert max_tokens_of(job, JobRequest("r", "a", 10), cap=20) == 20


@pytest.mark.parametrize(
    ("running", "workers", "placed", "expected"),
    [
        ({"a": ExecutionPlan(2, 1)}, ["w1", "w2", "w3"], {}, {"a": ("w1", "w2")}),
        ({"a": ExecutionPlan(1, 1), "b": ExecutionPlan(2, 1)}, ["w1", "w2"], {"a": ("w2",)}, {"a": ("w2",), "b": ("w1", "w2")}),
        ({"a": ExecutionPlan(4, 1)}, ["w1", "w2"], {}, {"a": ("w1", "w2")}),
        ({"a": ExecutionPlan(1, 1)}, ["w1"], {"a": ("gone",)}, {"a": ("w1",)}),
    ],
    ids=["spread", "kept-where-loaded", "capped-by-workers", "dead-worker-replaced"],
)
def test_replicas_go_where_they_run_then_to_the_least_loaded_workers(running, workers, placed, expected):
    assert assign_replicas(running, workers, placed) == expected


def test_stage_times_and_the_remaining_estimate():
    stages = (stage(("a", P2), ("b", P2), duration=10.0), stage(("b", P4), duration=5.0, start=10.0))
    run, _ = JobRun(make_job("ab"), stages).schedule(100.0)
    assert run.estimated_remaining_s(104.0) == pytest.approx(11.0)
    assert run.estimated_remaining_s(130.0) == pytest.approx(5.0)  # late: the current stage counts 0
    run, _ = finish_model(run, "a", 112.0).schedule(112.0)
    assert run.stage_times(113.0) == ((10.0, 12.0), (5.0, 1.0))
    run, _ = finish_model(run, "b", 116.0).schedule(116.0)
    assert run.estimated_remaining_s(120.0) == 0.0 and run.stage_times(120.0) == ((10.0, 12.0), (5.0, 4.0))


def test_a_run_deviates_when_another_model_ends_the_stage():
    stages = (stage(("a", P2), ("b", P2)), stage(("b", P2), ("c", P2)), stage(("d", P4),))
    run, _ = JobRun(make_job(), stages).schedule(0.0)
    assert not run.deviates()  # nothing finished
    assert not finish_model(run, "a", 1.0).deviates()  # as planned
    assert finish_model(run, "b", 1.0).deviates()
    assert not finish_model(run, "c", 1.0).deviates()  # c does not run: no stage ends


def test_replanning_searches_the_work_left_from_the_running_models(uniform_cdf):
    import random

    from forethought.planner import CostModel, ensembling_job, realise, samullm_plan

    from tests.unit.planner.conftest import fixed_executors

    job = ensembling_job((make_model("m7"), make_model("m13", "13b"), make_model("m7b")), [40, 60, 80, 100, 20, 30],
                         make_pool(4))
    cdfs = {model.name: uniform_cdf for model in job.models}
    cost = CostModel(job, executors=fixed_executors(1.0))
    plan = samullm_plan(job, cdfs, random.Random(3), lambda: 0.0, cost)
    run, _ = JobRun(job, plan.stages).schedule(0.0)
    first, = plan.stages[0].finished_models
    other = next(name for name, _ in plan.stages[0].assignments if name != first)
    run = finish_model(run, other, 2.0)  # another model ends stage 1
    assert run.deviates()
    again = run.replanned(realise(job, cdfs, random.Random(3)), cost, lambda: 0.0)
    assert again.stages[0] == replace_finished(plan.stages[0], (other,))
    left = {model.name for model in job.models} - {other}
    assert {name for s in again.stages[1:] for name in s.finished_models} == left
    assert {name for s in again.stages[1:] for name, _ in s.assignments} <= left
    assert not again.deviates()
    run, placement = again.schedule(2.0)
    assert run.pointer == 1 and dict(run.running) == dict(again.stages[1].assignments)
    # The model still running is kept where the new stage gives it the same plan (no reload).
    assert all(name not in placement.stop for name, plan_ in again.stages[1].assignments
               if again.running.get(name) == plan_)


def replace_finished(planned: Stage, finished: tuple[str, ...]) -> Stage:
    return Stage(planned.assignments, planned.start_s, planned.duration_s, planned.flops, finished)
