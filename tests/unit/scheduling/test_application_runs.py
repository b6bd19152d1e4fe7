"""The front door's bookkeeping of application runs: executions, their closing, states and the ACT."""

from __future__ import annotations

import pytest
from forethought.domain import InvalidField
from forethought.scheduling.application_runs import MAX_RUN_STEPS, ApplicationRun, StepState


def test_parallel_requests_join_one_execution_and_a_later_one_begins_the_next():
    run = ApplicationRun("r", "app", submitted_s=10.0)
    first, closed = run.begin_request("map", 100, now=11.0)
    second, _ = run.begin_request("map", 300, now=11.5)
    assert second is first and closed is None and (first.requests, first.in_flight) == (2, 2)
    run.first_token(first, 12.0)
    run.end_request(first, 40, 13.0)
    assert first.state is StepState.RUNNING  # one of its two requests is still in flight
    run.end_request(first, 60, 14.0)
    assert first.state is StepState.DONE and (first.mean_tokens(first.input_tokens), first.mean_tokens(first.output_tokens)) == (200, 50)
    assert first.service_s == 3.0 and first.parallelism == 2
    again, closed = run.begin_request("map", 100, now=15.0)  # nothing in flight: a loop back to the step
    assert again is not first and closed is first and first.closed and run.done_steps() == ["map"]
    assert run.attained_s(17.0) == 2.0


def test_a_numbered_request_joins_its_execution_even_after_its_siblings_ended():
    # The loss this guards against: a step's third request reached the scheduler after the other two had
    # finished, was taken for a loop back to the step, and the run was refused ("does not follow").
    run = ApplicationRun("r", "app", submitted_s=0.0)
    first, _ = run.begin_request("score", 10, now=1.0, execution=0)
    run.end_request(first, 4, 2.0)
    assert first.state is StepState.DONE
    late, closed = run.begin_request("score", 10, now=3.0, execution=0)
    assert late is first and closed is None and (first.requests, first.in_flight) == (2, 1)
    assert first.state is StepState.RUNNING  # watchers see it running again
    run.end_request(first, 4, 4.0)
    assert first.service_s == 3.0 and first.parallelism == 2
    again, closed = run.begin_request("score", 10, now=5.0, execution=1)  # the next number: a loop
    assert again is not first and closed is first and again.index == 1


def test_an_execution_number_that_is_neither_the_current_one_nor_the_next_is_refused_by_name():
    run = ApplicationRun("r", "app", submitted_s=0.0)
    with pytest.raises(InvalidField, match="must be 0 .the run's next step., got 1") as raised:
        run.begin_request("plan", 10, now=1.0, execution=1)
    assert raised.value.field == "execution" and run.executions == []  # nothing was begun
    plan, _ = run.begin_request("plan", 10, now=1.0, execution=0)
    with pytest.raises(InvalidField, match="0 is the run's execution of llm step 'plan', not of 'act'"):
        run.begin_request("act", 10, now=2.0, execution=0)
    with pytest.raises(InvalidField, match="must be 1 .the run's next step. or 0 .its current one, of 'plan'., got 2"):
        run.begin_request("plan", 10, now=2.0, execution=2)
    run.end_request(plan, 5, 3.0)
    run.report_tool("act", 1.0, now=4.0)  # a tool step takes position 1
    with pytest.raises(InvalidField, match="1 is the run's execution of tool step 'act'"):
        run.begin_request("act", 10, now=5.0, execution=1)
    assert run.begin_request("plan", 10, now=5.0, execution=2)[0].index == 2


def test_another_step_while_requests_are_in_flight_is_out_of_order():
    run = ApplicationRun("r", "app", submitted_s=0.0)
    execution, _ = run.begin_request("plan", 10, now=1.0)
    with pytest.raises(InvalidField, match="cannot begin while 1 request"):
        run.begin_request("act", 10, now=2.0)
    with pytest.raises(InvalidField) as raised:
        run.finish(3.0)
    assert raised.value.field == "run_id"
    run.end_request(execution, 5, 4.0)
    tool, closed = run.report_tool("act", 1.5, now=6.0)
    assert closed is execution and tool.started_s == 4.5 and tool.state is StepState.DONE
    assert run.finish(7.0) is tool and run.act_s == 7.0 and not run.failed
    assert [(event.step, event.state) for event in run.events][-1] == ("", StepState.DONE)
    with pytest.raises(InvalidField, match="has finished"):
        run.begin_request("plan", 1, 8.0)


def test_a_failed_request_fails_its_step_and_the_run():
    run = ApplicationRun("r", "app", submitted_s=0.0)
    execution, _ = run.begin_request("plan", 10, now=1.0)
    run.end_request(execution, None, 2.0)
    assert execution.state is StepState.FAILED and run.has_failed_step()
    run.finish(3.0)
    assert run.failed and run.events[-1].state is StepState.FAILED
    with pytest.raises(InvalidField, match="duration_s"):
        ApplicationRun("s", "app", 0.0).report_tool("t", -1.0, 1.0)


def test_a_run_holds_at_most_max_run_steps_and_a_step_past_them_changes_nothing():
    run = ApplicationRun("r", "app", submitted_s=0.0)
    for index in range(MAX_RUN_STEPS):
        if index % 2:
            run.report_tool("search", 0.1, now=float(index))
        else:
            execution, _ = run.begin_request("plan", 10, now=float(index))
            run.end_request(execution, 5, now=index + 0.5)
    last = run.current
    for step in (lambda: run.begin_request("plan", 10, now=1e5), lambda: run.report_tool("search", 0.1, now=1e5)):
        with pytest.raises(InvalidField, match=f"a run holds at most {MAX_RUN_STEPS} steps") as raised:
            step()
        assert raised.value.field == "step"
        assert len(run.executions) == MAX_RUN_STEPS and run.current is last and not last.closed  # nothing was begun or closed
    assert run.finish(2e5) is last and last.closed  # the run can still be finished
