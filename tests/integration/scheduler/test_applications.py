"""Application runs through the front door, as real processes over a real Redis: a run is submitted,
its LLM step runs on a worker, the demand service's prewarm decision warms the next step's tool on a
worker before the step is reported, the watch stream shows every step and the ACT, the demand graph
learns the run, and bad input gets a status naming the field."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from forethought.cluster.ports import free_port
from forethought.domain import SamplingParams
from forethought.v1 import common_pb2, demand_pb2, demand_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from google.protobuf.timestamp_pb2 import Timestamp

from tests.conftest import wait_serving
from tests.integration.live_mesh import wait_until
from tests.integration.scheduler.test_scheduler import MODEL, adopted, metric, token_request, worker

# A draft written by an LLM, then checked in a Python sandbox: the check's tool is cold, and its warm-up
# (t_p, set long below) exceeds the draft's whole estimated time, so Eq. 3 prewarms it at the draft's start.
DRAFT_AND_CHECK = """
name: draft_and_check
profiling_runs: 50
units:
  draft:
    backend: {kind: llm, model: SmolLM2-135M-Instruct}
    next: {check: 1.0}
    profile: {input_tokens: 64, output_tokens: {uniform: [8, 24]}}
  check:
    backend: {kind: tool, tool: python-sandbox}
    profile: {tool_duration_s: {uniform: [0.1, 0.3]}}
"""


@pytest.fixture
def mesh(start_service):
    """(scheduler stub, demand stub, scheduler metrics port, scheduler address) over a demand service and one
    sim worker."""
    demand = start_service("demand", "--seed", "3", "--walks", "300", "--warmup-tool-s", "30")
    worker(start_service, "w0", "1")
    port = free_port()
    front = start_service("scheduler", "--registry-poll-s", "0.1", "--heartbeat-ttl-s", "2", "--demand-address",
                          demand.address, "--rank-refresh-s", "0.2", "--metrics-port", str(port), "--policy", "gittins",
                          "--max-waiting-per-worker", "1", "--run-idle-ttl-s", "6")
    with grpc.insecure_channel(front.address) as scheduler_channel, grpc.insecure_channel(demand.address) as demand_channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(scheduler_channel)
        adopted(stub, 1)
        demand_stub = demand_pb2_grpc.DemandServiceStub(demand_channel)
        demand_stub.RegisterApplication(demand_pb2.RegisterApplicationRequest(application_file=DRAFT_AND_CHECK), timeout=60)
        yield stub, demand_stub, port, front.address


def step_request(request_id: str, run_id: str, step: str, max_tokens: int = 16) -> scheduler_pb2.GenerateRequest:
    request = token_request(request_id, list(range(100, 164)), max_tokens)
    request.application_id, request.step = run_id, step
    return request


def in_seconds(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(datetime.now(UTC) + timedelta(seconds=seconds))
    return stamp


def test_a_run_goes_step_by_step_with_its_tool_prewarmed_and_its_act_watched(mesh):
    stub, demand, port, _address = mesh
    submitted = stub.SubmitApplication(scheduler_pb2.SubmitApplicationRequest(
        application="draft_and_check", run_id="run-1", deadline=in_seconds(600)), timeout=30)
    assert submitted.run_id == "run-1" and submitted.estimated_completion_s > 0 and submitted.gittins_rank > 0
    watched: list[scheduler_pb2.WatchApplicationResponse] = []
    watcher = threading.Thread(target=lambda: watched.extend(
        stub.WatchApplication(scheduler_pb2.WatchApplicationRequest(run_id="run-1"), timeout=60)))
    watcher.start()

    replies = list(stub.Generate(step_request("draft-1", "run-1", "draft"), timeout=30))
    assert replies[-1].finish_reason == common_pb2.FINISH_REASON_LENGTH and replies[-1].usage.output_tokens == 16
    # Eq. 3 fired while the draft ran: the scheduler sent the check's tool to the worker, which warmed it.
    wait_until(lambda: metric(port, "forethought_prewarms_sent_total", kind="tool", outcome="ready") >= 1,
               "the sandbox prewarmed on the worker")

    reported = stub.ReportStep(scheduler_pb2.ReportStepRequest(run_id="run-1", step="check", duration_s=0.2), timeout=30)
    finished = stub.FinishApplication(scheduler_pb2.FinishApplicationRequest(run_id="run-1"), timeout=30)
    assert finished.steps == 2 and finished.learnt and finished.act_s > 0.2
    watcher.join(30)

    states = [(message.step, scheduler_pb2.StepState.Name(message.state)) for message in watched]
    assert states == [("draft", "STEP_STATE_QUEUED"), ("draft", "STEP_STATE_RUNNING"), ("draft", "STEP_STATE_DONE"),
                      ("check", "STEP_STATE_QUEUED"), ("check", "STEP_STATE_DONE"), ("", "STEP_STATE_DONE")]
    assert watched[-1].finished and watched[-1].act_s == pytest.approx(finished.act_s)
    # The rank moved as the run went on: with the draft behind it, less demand remains.
    assert reported.remaining_s < submitted.estimated_completion_s
    assert metric(port, "forethought_application_completion_seconds_count", application="draft_and_check", outcome="done") == 1
    # The demand graph learnt the run: a what-if from the check is now informed by it.
    assert demand.Estimate(demand_pb2.EstimateRequest(application="draft_and_check"), timeout=30).walks == 300


def test_waiting_steps_are_reordered_by_their_runs_rank(mesh):
    """Steps of many runs wait behind a full worker; the rank refresh reaches them (update_priority)."""
    stub, _demand, port, _address = mesh
    runs = [stub.SubmitApplication(scheduler_pb2.SubmitApplicationRequest(application="draft_and_check"), timeout=30).run_id
            for _ in range(12)]
    results: dict[str, list[scheduler_pb2.GenerateResponse]] = {}
    threads = [threading.Thread(target=lambda run=run: results.__setitem__(run, list(
        stub.Generate(step_request(f"{run}-draft", run, "draft", 64), timeout=60)))) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(len(replies) and replies[-1].usage.output_tokens for replies in results.values()) == [64] * 12
    assert metric(port, "forethought_application_rank_updates_total") > 0
    for run in runs:
        assert stub.ReportStep(scheduler_pb2.ReportStepRequest(run_id=run, step="check", duration_s=0.1), timeout=30).remaining_s >= 0
        assert stub.FinishApplication(scheduler_pb2.FinishApplicationRequest(run_id=run), timeout=30).learnt


def test_a_run_left_idle_is_abandoned_as_failed(mesh):
    stub, _demand, port, _address = mesh
    run = stub.SubmitApplication(scheduler_pb2.SubmitApplicationRequest(application="draft_and_check"), timeout=30).run_id
    (last,) = list(stub.WatchApplication(scheduler_pb2.WatchApplicationRequest(run_id=run), timeout=30))
    assert last.finished and last.state == scheduler_pb2.STEP_STATE_FAILED
    assert metric(port, "forethought_application_completion_seconds_count", application="draft_and_check", outcome="failed") == 1


def status_of(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value.code(), raised.value.details()


def test_bad_application_input_is_refused_by_field(mesh):
    stub, _demand, _port, _address = mesh
    submit = stub.SubmitApplication
    code, details = status_of(lambda: submit(scheduler_pb2.SubmitApplicationRequest(application="nope"), timeout=30))
    assert code == grpc.StatusCode.NOT_FOUND and "nope" in details
    code, details = status_of(lambda: submit(scheduler_pb2.SubmitApplicationRequest(
        application="draft_and_check", deadline=in_seconds(-5)), timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("deadline:")
    code, details = status_of(lambda: list(stub.Generate(step_request("x", "no-such-run", "draft"), timeout=30)))
    assert code == grpc.StatusCode.NOT_FOUND and details.startswith("application_id:")

    run = submit(scheduler_pb2.SubmitApplicationRequest(application="draft_and_check", run_id="r"), timeout=30).run_id
    code, _ = status_of(lambda: submit(scheduler_pb2.SubmitApplicationRequest(application="draft_and_check", run_id="r"), timeout=30))
    assert code == grpc.StatusCode.ALREADY_EXISTS
    code, details = status_of(lambda: list(stub.Generate(step_request("early", run, "check"), timeout=30)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("step:") and "starts at 'draft'" in details
    code, details = status_of(lambda: stub.ReportStep(scheduler_pb2.ReportStepRequest(run_id=run, step="draft", duration_s=-1), timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("duration_s:")
    code, details = status_of(lambda: stub.FinishApplication(scheduler_pb2.FinishApplicationRequest(run_id=run), timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "has run no step" in details
    not_a_time = step_request("bad-deadline", run, "draft")
    not_a_time.deadline.seconds, not_a_time.deadline.nanos = 10, -1
    code, details = status_of(lambda: list(stub.Generate(not_a_time, timeout=30)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("deadline:")
    # Nothing accepted was lost: the refusals left the run where it was, and it still completes.
    assert list(stub.Generate(step_request("d", run, "draft"), timeout=30))[-1].usage.output_tokens == 16
    code, details = status_of(lambda: stub.FinishApplication(scheduler_pb2.FinishApplicationRequest(run_id=run), timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "cannot end a run" in details  # the check must come first
    stub.ReportStep(scheduler_pb2.ReportStepRequest(run_id=run, step="check", duration_s=0.1), timeout=30)
    assert stub.FinishApplication(scheduler_pb2.FinishApplicationRequest(run_id=run), timeout=30).learnt
    code, details = status_of(lambda: stub.FinishApplication(scheduler_pb2.FinishApplicationRequest(run_id=run), timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "has finished" in details


def test_a_numbered_parallel_request_joins_its_step_after_its_siblings_ended(mesh):
    # The loss this guards against: one of a step's parallel requests reached the scheduler after the
    # others had finished, was taken for a loop back to the step, and the run was refused.
    stub, _demand, _port, _address = mesh
    run = stub.SubmitApplication(scheduler_pb2.SubmitApplicationRequest(application="draft_and_check"), timeout=30).run_id

    def numbered(request_id: str, execution: int) -> scheduler_pb2.GenerateRequest:
        request = step_request(request_id, run, "draft")
        request.execution = execution
        return request

    assert list(stub.Generate(numbered("first", 0), timeout=30))[-1].usage.output_tokens == 16
    assert list(stub.Generate(numbered("late", 0), timeout=30))[-1].usage.output_tokens == 16  # joins, though alone
    code, details = status_of(lambda: list(stub.Generate(step_request("unnumbered", run, "draft"), timeout=30)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "'draft' does not follow 'draft'" in details  # taken for a loop
    code, details = status_of(lambda: list(stub.Generate(numbered("far", 5), timeout=30)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("execution: must be 1")
    bad = token_request("bad", list(range(100, 164)), 4)
    bad.execution = 0
    code, details = status_of(lambda: list(stub.Generate(bad, timeout=30)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details == "execution: needs application_id and step"
    stub.ReportStep(scheduler_pb2.ReportStepRequest(run_id=run, step="check", duration_s=0.1), timeout=30)
    finished = stub.FinishApplication(scheduler_pb2.FinishApplicationRequest(run_id=run), timeout=30)
    assert finished.steps == 2 and finished.learnt  # one draft execution of two requests, then the check


def test_every_example_application_runs_live_from_its_file(start_service, repo, capsys):
    """`forethought app run FILE` on each example: registered, drawn, played step by step, finished."""
    from forethought.application_runner import main as app_main

    demand = start_service("demand", "--seed", "5", "--walks", "200")
    tokenizer = start_service("tokenizer")
    worker(start_service, "w0", "50")
    front = start_service("scheduler", "--registry-poll-s", "0.1", "--heartbeat-ttl-s", "2", "--demand-address", demand.address,
                          "--tokenizer-address", tokenizer.address, "--policy", "gittins")
    with grpc.insecure_channel(front.address) as channel:
        adopted(scheduler_pb2_grpc.SchedulerServiceStub(channel), 1)
    examples = sorted((repo / "examples" / "applications").glob("*.yaml"))
    assert len(examples) >= 6
    for example in examples:
        assert app_main(["run", str(example), "--scheduler", front.address, "--demand", demand.address,
                         "--max-tokens", "4", "--max-tool-s", "0.02", "--seed", "1"]) == 0, example.name
        printed = capsys.readouterr().out
        assert "finished: ACT" in printed and "learnt by the demand graph" in printed, printed
        assert "run done: ACT" in printed, printed  # the watch stream saw the end


def test_the_blocking_client_drives_a_run_and_names_refused_fields(mesh):
    from forethought.client import ClientError, ForethoughtClient

    _stub, _demand, _port, address = mesh
    with ForethoughtClient(address, timeout_s=30) as client:
        run = client.submit_application("draft_and_check", deadline=time.time() + 600)
        assert run.estimated_completion_s > 0 and run.gittins_rank > 0
        answer = client.complete(model=MODEL, max_tokens=8, token_ids=list(range(100, 164)),
                                 application_id=run.run_id, step="draft", sampling=SamplingParams(ignore_eos=True))
        assert answer.usage is not None and answer.usage.output_tokens == 8
        with pytest.raises(ClientError) as refused:
            client.report_step(run.run_id, "check", -1.0)
        assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT and refused.value.field == "duration_s"
        assert client.report_step(run.run_id, "check", 0.1) >= 0
        finished = client.finish_application(run.run_id)
        progress = list(client.watch_application(run.run_id))
    assert finished.learnt and finished.steps == 2
    assert [(item.step, item.state) for item in progress][-2:] == [("check", "DONE"), ("", "DONE")]
    assert progress[-1].finished and progress[-1].act_s == pytest.approx(finished.act_s)



INSTRUCTIONS = ("You are a careful assistant that checks arithmetic claims. For each claim, restate it, compute "
                "both sides step by step, and answer TRUE or FALSE on the last line. ") * 4 + "\n\n"
PREFIXED = f"""
name: prefixed
profiling_runs: 50
units:
  draft:
    backend: {{kind: llm, model: {MODEL}}}
    next: {{verify: 1.0}}
    profile: {{input_tokens: 64, output_tokens: 16}}
  verify:
    backend: {{kind: llm, model: {MODEL}, prompt_prefix: {INSTRUCTIONS!r}}}
    profile: {{input_tokens: 200, output_tokens: 8}}
"""


def test_the_next_step_s_prompt_prefix_is_prefilled_on_a_worker_before_it_is_called(start_service):
    """Eq. 3 fires while the draft runs; the verify step's instructions are prefilled on the worker, and
    its request then hits that prefix: the worker counts a KV-prefix prewarm hit with its benefit."""
    demand = start_service("demand", "--seed", "3", "--walks", "200", "--warmup-prefix-s", "30")
    tokenizer = start_service("tokenizer")
    worker_metrics = free_port()
    worker(start_service, "w0", "20", "--metrics-port", str(worker_metrics))
    port = free_port()
    front = start_service("scheduler", "--registry-poll-s", "0.1", "--heartbeat-ttl-s", "2", "--demand-address",
                          demand.address, "--tokenizer-address", tokenizer.address, "--metrics-port", str(port))
    with grpc.insecure_channel(front.address) as channel, grpc.insecure_channel(demand.address) as demand_channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        adopted(stub, 1)
        demand_pb2_grpc.DemandServiceStub(demand_channel).RegisterApplication(
            demand_pb2.RegisterApplicationRequest(application_file=PREFIXED), timeout=60)
        run = stub.SubmitApplication(scheduler_pb2.SubmitApplicationRequest(application="prefixed"), timeout=30).run_id
        list(stub.Generate(step_request("draft", run, "draft"), timeout=30))
        wait_until(lambda: metric(port, "forethought_prewarms_sent_total", kind="kv_prefix", outcome="ready") >= 1,
                   "the verify step's prefix prefilled on the worker")
        verify = scheduler_pb2.GenerateRequest(model=MODEL, text=INSTRUCTIONS + "Claim: 17 * 3 = 51.", max_tokens=8,
                                               application_id=run, step="verify")
        replies = list(stub.Generate(verify, timeout=30))
        assert stub.FinishApplication(scheduler_pb2.FinishApplicationRequest(run_id=run), timeout=30).learnt
    assert replies[-1].usage.cached_prompt_tokens >= 64  # the instructions' blocks were already cached
    assert metric(worker_metrics, "forethought_worker_prewarms_total", kind="kv_prefix", outcome="hit") == 1
    assert metric(worker_metrics, "forethought_worker_prewarm_benefit_seconds_total", kind="kv_prefix") > 0


def test_runs_go_on_unranked_while_the_demand_service_is_down_and_are_ranked_again_after(start_service, redis_server,
                                                                                         namespace, tmp_path):
    """The demand service killed mid-run: the run's next steps are served (degraded: unranked, unlearnt),
    the gauge and log say so, new runs are accepted; restarted, it ranks and learns again (its graphs are
    in Redis)."""
    port = free_port()
    argv = [sys.executable, "-m", "forethought.cli", "serve", "demand", "--port", str(port), "--redis-url", redis_server.url,
            "--namespace", namespace, "--seed", "3", "--walks", "200"]
    demand = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    try:
        assert wait_serving(address, 60, demand)
        worker(start_service, "w0", "20")
        metrics = free_port()
        front = start_service("scheduler", "--registry-poll-s", "0.1", "--heartbeat-ttl-s", "2", "--demand-address", address,
                              "--metrics-port", str(metrics), "--demand-timeout-s", "1")
        with grpc.insecure_channel(front.address) as channel, grpc.insecure_channel(address) as demand_channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            adopted(stub, 1)
            demand_pb2_grpc.DemandServiceStub(demand_channel).RegisterApplication(
                demand_pb2.RegisterApplicationRequest(application_file=DRAFT_AND_CHECK), timeout=60)
            submit = scheduler_pb2.SubmitApplicationRequest(application="draft_and_check")
            run = stub.SubmitApplication(submit, timeout=30).run_id
            demand.kill()
            demand.wait()
            served = list(stub.Generate(step_request("d1", run, "draft"), timeout=30))
            assert served[-1].usage.output_tokens == 16
            stub.ReportStep(scheduler_pb2.ReportStepRequest(run_id=run, step="check", duration_s=0.1), timeout=30)
            assert not stub.FinishApplication(scheduler_pb2.FinishApplicationRequest(run_id=run), timeout=30).learnt
            assert metric(metrics, "forethought_degraded", dependency="demand") == 1
            unranked = stub.SubmitApplication(submit, timeout=30)
            assert unranked.run_id and unranked.estimated_completion_s == 0

            restarted = time.monotonic()
            demand = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            assert wait_serving(address, 60, demand)
            wait_until(lambda: stub.SubmitApplication(submit, timeout=30).estimated_completion_s > 0, "runs ranked again",
                       timeout_s=30)
            recovery_s = time.monotonic() - restarted
            assert metric(metrics, "forethought_degraded", dependency="demand") == 0
        print(f"ranked again {recovery_s:.1f} s after the demand service was restarted")
        assert "goes on without the demand service" in front.log() and "demand service answers again" in front.log()
    finally:
        demand.kill()
        demand.wait()
