"""The demand service as a real process over a real Redis: register an example application, record runs,
estimate, watch prewarm decisions, restart and find everything again, and refuse bad input by field."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import grpc
import pytest
from forethought.rpc.errors import rich_status_of
from forethought.v1 import demand_pb2, demand_pb2_grpc
from google.rpc import error_details_pb2

SERVICE_ARGS = ("--seed", "7", "--walks", "600")


@pytest.fixture
def code_generation(repo) -> str:
    return (repo / "examples" / "applications" / "code_generation.yaml").read_text()


def register(stub, content: str, name: str = "", keep_existing: bool = False):
    return stub.RegisterApplication(
        demand_pb2.RegisterApplicationRequest(application=name, application_file=content, keep_existing=keep_existing), timeout=60)


def record_run(stub, application: str, run_id: str, tool_s: float):
    """A code-generation run that passes its tests at the first attempt, the test run taking ``tool_s``."""
    first = stub.Record(demand_pb2.RecordRequest(application=application, run_id=run_id, step="write_code",
                                                 input_tokens=900, output_tokens=540, service_s=7.0), timeout=10)
    last = stub.Record(demand_pb2.RecordRequest(application=application, run_id=run_id, step="execute_code",
                                                service_s=tool_s, run_finished=True), timeout=10)
    return first, last


def estimate_at_execute(stub, application: str) -> demand_pb2.EstimateResponse:
    return stub.Estimate(demand_pb2.EstimateRequest(application=application, done_steps=["write_code"],
                                                    current_step="execute_code"), timeout=30)


def test_an_example_application_estimates_and_learns_from_recorded_runs(start_service, code_generation):
    service = start_service("demand", *SERVICE_ARGS)
    with grpc.insecure_channel(service.address) as channel:
        stub = demand_pb2_grpc.DemandServiceStub(channel)
        registered = register(stub, code_generation)
        assert (registered.application, registered.steps, registered.entry, registered.kept) == (
            "code_generation", 3, "write_code", False)
        assert registered.recorded > 400  # 200 profiling runs, each about 4.4 units long

        fresh = stub.Estimate(demand_pb2.EstimateRequest(application="code_generation"), timeout=30)
        assert fresh.current_step == "write_code" and fresh.walks == 600
        assert len(fresh.remaining_quantiles_s) == 9
        assert list(fresh.remaining_quantiles_s) == sorted(fresh.remaining_quantiles_s)
        assert fresh.remaining_quantiles_s[0] < fresh.mean_remaining_s < fresh.remaining_quantiles_s[-1] * 2
        assert fresh.gittins_rank > 0 and fresh.bucket_period_s > 0 and fresh.slack_s == 0

        # The current step's attained service is ruled out of what remains.
        attained = stub.Estimate(demand_pb2.EstimateRequest(application="code_generation",
                                                            attained_s=fresh.remaining_quantiles_s[4]), timeout=30)
        assert attained.remaining_quantiles_s[0] < fresh.remaining_quantiles_s[4]
        deadline = stub.Estimate(demand_pb2.EstimateRequest(application="code_generation", deadline_in_s=600), timeout=30)
        assert 0 < deadline.slack_s < 600

        before = estimate_at_execute(stub, "code_generation")
        for index in range(60):
            first, last = record_run(stub, "code_generation", f"run-{index}", tool_s=400.0)
            assert (first.run_steps, first.learnt, last.run_steps, last.learnt) == (1, False, 2, True)
        after = estimate_at_execute(stub, "code_generation")
        # About one test run in nine now takes 400 s instead of about 2.5 s.
        assert after.mean_remaining_s > before.mean_remaining_s + 30
        assert after.remaining_quantiles_s[-1] > 300 > before.remaining_quantiles_s[-1]
        assert register(stub, code_generation, keep_existing=True).recorded == registered.recorded + 120


def test_a_restarted_service_serves_what_was_registered_and_learnt(start_service, code_generation):
    service = start_service("demand", *SERVICE_ARGS)
    with grpc.insecure_channel(service.address) as channel:
        stub = demand_pb2_grpc.DemandServiceStub(channel)
        register(stub, code_generation, name="cg")
        for index in range(80):
            record_run(stub, "cg", f"run-{index}", tool_s=300.0)
        stub.Record(demand_pb2.RecordRequest(application="cg", run_id="unfinished", step="write_code",
                                             input_tokens=800, output_tokens=400), timeout=10)
        learnt = estimate_at_execute(stub, "cg")
        recorded = register(stub, code_generation, name="cg", keep_existing=True).recorded
    assert service.terminate() == 0, service.log()

    restarted = start_service("demand", *SERVICE_ARGS)
    with grpc.insecure_channel(restarted.address) as channel:
        stub = demand_pb2_grpc.DemandServiceStub(channel)
        again = estimate_at_execute(stub, "cg")
        assert again.remaining_quantiles_s[-1] > 250  # the 300 s test runs are still there
        assert abs(again.mean_remaining_s - learnt.mean_remaining_s) < 0.25 * learnt.mean_remaining_s
        kept = register(stub, code_generation, name="cg", keep_existing=True)
        assert kept.kept and kept.recorded == recorded
        # The unfinished run's first step outlived the restart: its second step finishes it.
        finished = stub.Record(demand_pb2.RecordRequest(application="cg", run_id="unfinished", step="execute_code",
                                                        service_s=2.0, run_finished=True), timeout=10)
        assert (finished.run_steps, finished.learnt) == (2, True)
        replaced = register(stub, code_generation, name="cg")
        assert not replaced.kept and replaced.recorded < recorded


TRAPPED = json.dumps({"name": "trapped", "units": {
    "ask": {"backend": {"kind": "llm", "model": "Llama-2-7B"}, "next": {"search": 1.0}},
    "search": {"backend": {"kind": "tool", "tool": "web-search"}, "next": {"ask": 1.0}},
}})


def rpc(stub, method: str, **fields):
    request = getattr(demand_pb2, f"{method}Request")(**fields)
    return getattr(stub, method)(request, timeout=30)


BAD_INPUT = [
    pytest.param("Estimate", {"application": "nowhere"}, grpc.StatusCode.NOT_FOUND, "application", id="unknown-application"),
    pytest.param("Record", {"application": "nowhere", "run_id": "r", "step": "write_code"},
                 grpc.StatusCode.NOT_FOUND, "application", id="record-unknown-application"),
    pytest.param("RegisterApplication", {"application_file": TRAPPED}, grpc.StatusCode.INVALID_ARGUMENT,
                 "application_file.units.ask.next", id="cycle-without-exit"),
    pytest.param("RegisterApplication", {"application_file": "  "}, grpc.StatusCode.INVALID_ARGUMENT,
                 "application_file", id="empty-file"),
    pytest.param("RegisterApplication", {"application_file": "name: [unclosed"}, grpc.StatusCode.INVALID_ARGUMENT,
                 "application_file", id="not-yaml"),
    pytest.param("RegisterApplication", {"application_file": "name: big\nprofiling_runs: 10001\nunits: {}"},
                 grpc.StatusCode.INVALID_ARGUMENT, "application_file.profiling_runs", id="too-many-profiling-runs"),
    pytest.param("RegisterApplication", {"application": "a:b", "application_file": TRAPPED},
                 grpc.StatusCode.INVALID_ARGUMENT, "application", id="bad-name"),
    pytest.param("RegisterApplication", {"application": "a", "steps": [demand_pb2.StepSpec(name="x")]},
                 grpc.StatusCode.INVALID_ARGUMENT, "steps", id="dag-steps"),
    pytest.param("Record", {"application": "cg", "run_id": "r", "step": "write_code", "service_s": -1.0},
                 grpc.StatusCode.INVALID_ARGUMENT, "service_s", id="negative-duration"),
    pytest.param("Record", {"application": "cg", "run_id": "r", "step": "write_code", "output_tokens": -5},
                 grpc.StatusCode.INVALID_ARGUMENT, "output_tokens", id="negative-length"),
    pytest.param("Record", {"application": "cg", "step": "write_code"}, grpc.StatusCode.INVALID_ARGUMENT,
                 "run_id", id="no-run-id"),
    pytest.param("Record", {"application": "cg", "run_id": "r", "step": "compile"}, grpc.StatusCode.INVALID_ARGUMENT,
                 "step", id="unknown-step"),
    pytest.param("Record", {"application": "cg", "run_id": "r", "step": "fix_code"}, grpc.StatusCode.INVALID_ARGUMENT,
                 "step", id="run-not-at-entry"),
    pytest.param("Record", {"application": "cg", "run_id": "started", "step": "fix_code"},
                 grpc.StatusCode.INVALID_ARGUMENT, "step", id="step-out-of-order"),
    pytest.param("Record", {"application": "cg", "run_id": "r", "step": "write_code", "run_finished": True},
                 grpc.StatusCode.INVALID_ARGUMENT, "run_finished", id="cannot-end-there"),
    pytest.param("Estimate", {"application": "cg", "done_steps": ["write_code"], "current_step": "fix_code"},
                 grpc.StatusCode.INVALID_ARGUMENT, "current_step", id="current-step-out-of-order"),
    pytest.param("Estimate", {"application": "cg", "done_steps": ["execute_code"], "current_step": "fix_code"},
                 grpc.StatusCode.INVALID_ARGUMENT, "done_steps[0]", id="done-steps-not-from-entry"),
    pytest.param("Estimate", {"application": "cg", "done_steps": ["write_code"]}, grpc.StatusCode.INVALID_ARGUMENT,
                 "current_step", id="current-step-missing"),
    pytest.param("Estimate", {"application": "cg", "run_id": "started", "done_steps": ["write_code", "execute_code"],
                              "current_step": "fix_code"},
                 grpc.StatusCode.INVALID_ARGUMENT, "done_steps", id="done-steps-differ-from-recorded"),
    pytest.param("Estimate", {"application": "cg", "deadline_in_s": -3.0}, grpc.StatusCode.INVALID_ARGUMENT,
                 "deadline_in_s", id="deadline-passed"),
    pytest.param("Estimate", {"application": "cg", "attained_s": -1.0}, grpc.StatusCode.INVALID_ARGUMENT,
                 "attained_s", id="negative-attained"),
]


@pytest.fixture
def bad_input_stub(start_service, code_generation):
    service = start_service("demand", *SERVICE_ARGS)
    with grpc.insecure_channel(service.address) as channel:
        stub = demand_pb2_grpc.DemandServiceStub(channel)
        register(stub, code_generation, name="cg")
        stub.Record(demand_pb2.RecordRequest(application="cg", run_id="started", step="write_code"), timeout=10)
        yield stub


def test_bad_input_names_the_field(bad_input_stub):
    for case in BAD_INPUT:
        method, fields, code, field = case.values
        with pytest.raises(grpc.RpcError) as raised:
            rpc(bad_input_stub, method, **fields)
        error = raised.value
        assert (case.id, error.code()) == (case.id, code), error.details()
        assert error.details().startswith(f"{field}:"), (case.id, error.details())
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            violation = error_details_pb2.BadRequest()
            assert rich_status_of(error).details[0].Unpack(violation)
            assert violation.field_violations[0].field == field
    # Nothing refused was kept: the started run still has its one step, and no application 'trapped' exists.
    step = bad_input_stub.Record(demand_pb2.RecordRequest(application="cg", run_id="started", step="execute_code"), timeout=10)
    assert step.run_steps == 2
    with pytest.raises(grpc.RpcError) as raised:
        rpc(bad_input_stub, "Estimate", application="trapped")
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND


FETCH_THEN_SEARCH = json.dumps({"name": "fetch_then_search", "profiling_runs": 50, "units": {
    "fetch": {"backend": {"kind": "tool", "tool": "python-sandbox"}, "next": {"search": 1.0},
              "profile": {"tool_duration_s": 3.0}},
    "search": {"backend": {"kind": "tool", "tool": "web-search"}, "profile": {"tool_duration_s": 1.0}},
}})


class Decisions:
    """Reads a WatchPrewarm stream in the background (cancelling a read would cancel the call)."""

    def __init__(self, stub, effectiveness: float = 0.0) -> None:
        self.call = stub.WatchPrewarm(demand_pb2.WatchPrewarmRequest(effectiveness=effectiveness))
        self.received: asyncio.Queue = asyncio.Queue()
        self._reading = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for reply in self.call:
            await self.received.put(reply.decision)

    async def next(self, timeout_s: float) -> demand_pb2.PrewarmDecision:
        return await asyncio.wait_for(self.received.get(), timeout_s)

    def close(self) -> None:
        self.call.cancel()
        self._reading.cancel()


async def test_prewarm_decisions_come_when_due_and_never_for_a_step_left(start_service):
    """``fetch`` always takes 3 s and the web-search backend 1 s to warm: a prewarm is due 2 s into ``fetch``."""
    service = start_service("demand", *SERVICE_ARGS, "--warmup-tool-s", "1.0")
    async with grpc.aio.insecure_channel(service.address) as channel:
        stub = demand_pb2_grpc.DemandServiceStub(channel)
        await stub.RegisterApplication(demand_pb2.RegisterApplicationRequest(application_file=FETCH_THEN_SEARCH), timeout=60)
        watch = Decisions(stub, effectiveness=0.5)

        async def report(run_id: str, attained_s: float) -> None:
            await stub.Estimate(demand_pb2.EstimateRequest(application="fetch_then_search", run_id=run_id,
                                                           current_step="fetch", attained_s=attained_s), timeout=30)

        await report("left", 0.0)  # due in 2 s, but the run finishes its step first
        await stub.Record(demand_pb2.RecordRequest(application="fetch_then_search", run_id="left", step="fetch",
                                                   service_s=0.5), timeout=10)
        await report("late", 1.5)
        late_reported = time.monotonic()
        await report("now", 2.5)
        first = await watch.next(10)
        assert (first.run_id, first.step, first.current_step, first.backend, first.tool) == (
            "now", "search", "fetch", "web-search", "web-search")
        assert (first.selection_probability, first.warmup_s, first.start_in_s) == (1.0, 1.0, 0.0)
        second = await watch.next(10)
        assert second.run_id == "late"
        assert time.monotonic() - late_reported >= 0.45  # sent when due, not when reported
        with pytest.raises(asyncio.TimeoutError):  # "left" would be due 2 s after its report
            await watch.next(2.5)
        watch.close()


async def test_replacing_an_application_drops_the_timers_of_its_runs(start_service):
    service = start_service("demand", *SERVICE_ARGS, "--warmup-tool-s", "1.0")
    async with grpc.aio.insecure_channel(service.address) as channel:
        stub = demand_pb2_grpc.DemandServiceStub(channel)
        register = demand_pb2.RegisterApplicationRequest(application_file=FETCH_THEN_SEARCH)
        await stub.RegisterApplication(register, timeout=60)
        watch = Decisions(stub)
        await stub.Estimate(demand_pb2.EstimateRequest(application="fetch_then_search", run_id="old", current_step="fetch",
                                                       attained_s=1.0), timeout=30)  # due in 1 s
        assert not (await stub.RegisterApplication(register, timeout=60)).kept
        with pytest.raises(asyncio.TimeoutError):
            await watch.next(1.5)
        await stub.Estimate(demand_pb2.EstimateRequest(application="fetch_then_search", run_id="new", current_step="fetch",
                                                       attained_s=2.5), timeout=30)
        assert (await watch.next(10)).run_id == "new"
        watch.close()


async def test_an_open_prewarm_stream_ends_when_the_service_stops(start_service):
    service = start_service("demand", *SERVICE_ARGS, "--grace-s", "20")
    async with grpc.aio.insecure_channel(service.address) as channel:
        watch = demand_pb2_grpc.DemandServiceStub(channel).WatchPrewarm(demand_pb2.WatchPrewarmRequest())
        await asyncio.sleep(0.5)  # the call reaches the handler, which sends nothing until a decision is due
        stopping = time.monotonic()
        service.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(watch.read(), 10) == grpc.aio.EOF
        assert await watch.code() == grpc.StatusCode.OK
    assert await asyncio.to_thread(service.process.wait, 10) == 0
    assert time.monotonic() - stopping < 5  # not the 20 s grace


def test_a_run_whose_step_has_not_changed_is_re_ranked_from_its_estimate(start_service, code_generation):
    """Re-ranking at a larger attained service reuses the walks of the same position (Hermes 3.3); once the
    graph learns a run, the position is walked afresh."""
    service = start_service("demand", *SERVICE_ARGS)
    with grpc.insecure_channel(service.address) as channel:
        stub = demand_pb2_grpc.DemandServiceStub(channel)
        register(stub, code_generation)
        first, again = (estimate_at_execute(stub, "code_generation") for _ in range(2))
        assert list(again.remaining_quantiles_s) == list(first.remaining_quantiles_s)
        later = stub.Estimate(demand_pb2.EstimateRequest(application="code_generation", done_steps=["write_code"],
                                                         current_step="execute_code", attained_s=1.0), timeout=30)
        assert later.gittins_rank != first.gittins_rank  # the same walks, seen from one second of attained service
        record_run(stub, "code_generation", "learnt", tool_s=3.0)
        assert list(estimate_at_execute(stub, "code_generation").remaining_quantiles_s) != list(first.remaining_quantiles_s)
