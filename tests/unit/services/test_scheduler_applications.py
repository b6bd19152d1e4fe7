"""The scheduler's application runs against a demand service that answers late: a step whose report is
cancelled (its client left) must not stay in flight, or the run could never end nor be abandoned."""

from __future__ import annotations

import asyncio

import pytest
from forethought.domain import InvalidField
from forethought.services.scheduler.applications import ApplicationRuns
from forethought.v1 import demand_pb2, scheduler_pb2


class StalledDemand:
    """Answers the run's submission and the check of a step's order, never the step's report (which names
    the run). A fake: this is a pure unit test."""

    def __init__(self) -> None:
        self.estimates = 0

    async def Estimate(self, request: demand_pb2.EstimateRequest, timeout: float, metadata: object) -> demand_pb2.EstimateResponse:
        self.estimates += 1
        if request.run_id:
            await asyncio.Event().wait()
        return demand_pb2.EstimateResponse(gittins_rank=1.0, mean_remaining_s=5.0)


async def test_a_step_cancelled_while_its_report_waits_leaves_the_run_free_to_be_abandoned() -> None:
    now = [100.0]
    demand = StalledDemand()
    runs = ApplicationRuns(demand, revise=lambda *_: True, timeout_s=5.0, idle_ttl_s=60.0,
                           clock=lambda: now[0])
    run_id = (await runs.submit(scheduler_pb2.SubmitApplicationRequest(application="app", run_id="r"))).run_id
    step = asyncio.ensure_future(runs.begin_step(run_id, "draft", "req-1", input_tokens=64))
    while demand.estimates < 3:  # the run submitted, the step checked, its report sent
        await asyncio.sleep(0.001)
    step.cancel()
    await asyncio.gather(step, return_exceptions=True)
    now[0] += 61.0
    assert await runs.expire_idle() == [run_id]  # nothing left in flight: the idle run is abandoned


async def test_an_application_name_that_no_registration_could_have_is_refused_before_the_demand_service() -> None:
    demand = StalledDemand()
    runs = ApplicationRuns(demand, revise=lambda *_: True, timeout_s=5.0, idle_ttl_s=60.0)
    for name in ("a" * 129, "spaces in it", "label\"quote"):
        with pytest.raises(InvalidField) as refused:
            await runs.submit(scheduler_pb2.SubmitApplicationRequest(application=name))
        assert refused.value.field == "application" and "[A-Za-z0-9_.-]{1,128}" in refused.value.rule
    assert demand.estimates == 0  # refused up front: with the demand service down, it would have been a metric label
