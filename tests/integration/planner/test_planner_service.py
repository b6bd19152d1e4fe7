"""The planner service as a real process: it plans an example job as the library does, names the field of
bad input, times a search out, reads CASTILLO from its data directory, and `forethought plan` prints the
stages from it and in-process."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import grpc
import pytest
import redis.asyncio as aioredis
from forethought.cluster.redis_client import COMMAND_TIMEOUT_S
from forethought.cluster.redis_server import start_redis
from forethought.planner import LatencyCoefficients, LinearTerms, ModelNode
from forethought.planner.calibration import CalibratedProfile, load_profile, save_profile
from forethought.planner.job_file import MODEL_SHAPES, load_job_file, plan_job, resolve_cdfs
from forethought.planner.lengths import castillo_path
from forethought.rpc.errors import rich_status_of
from forethought.services.planner.job_store import JobStore
from forethought.services.planner.servicer import job_from_proto, job_to_proto, plans_to_proto
from forethought.v1 import planner_pb2, planner_pb2_grpc
from google.rpc import error_details_pb2

JOB = "examples/jobs/routing.yaml"  # needs no data: its output lengths are listed


@pytest.fixture
def job_file(repo):
    return load_job_file(repo / JOB)


@pytest.fixture
def planner(start_service):
    return start_service("planner")


@pytest.fixture
def stub(planner):
    with grpc.insecure_channel(planner.address) as channel:
        yield planner_pb2_grpc.PlannerServiceStub(channel)


def test_a_job_survives_the_wire(job_file):
    assert job_from_proto(job_to_proto(job_file), job_file.seed) == job_file


def test_plan_answers_stages_that_cover_every_model_and_beat_the_heuristics(stub, job_file):
    reply = stub.Plan(planner_pb2.PlanRequest(job=job_to_proto(job_file), seed=job_file.seed), timeout=120)
    models = {model.name for model in job_file.job.models}
    assert reply.job_id.startswith("routing-") and reply.requests == len(job_file.job.requests)
    assert sorted(name for stage in reply.stages for name in stage.finished_models) == sorted(models)
    assert {p.model for stage in reply.stages for p in stage.placements} == models
    start = 0.0
    for stage in reply.stages:
        assert stage.start_s == pytest.approx(start) and stage.estimated_s > 0 and stage.flops > 0
        assert sum(p.replicas * p.gpus for p in stage.placements) <= job_file.job.devices.count
        start += stage.estimated_s
    assert reply.estimated_makespan_s == pytest.approx(start) and reply.estimated_makespan_s > 0
    assert 0 < reply.baseline_max_heuristic_s and 0 < reply.baseline_min_heuristic_s
    assert reply.estimated_makespan_s <= max(reply.baseline_max_heuristic_s, reply.baseline_min_heuristic_s)
    assert reply.search_s > 0 and reply.simulations > 0
    # The service plans what the library plans in-process.
    local = plans_to_proto(reply.job_id, job_file.job, plan_job(job_file, resolve_cdfs(job_file), time.perf_counter))
    assert list(reply.stages) == list(local.stages)
    assert reply.baseline_min_heuristic_s == local.baseline_min_heuristic_s


def broken(job_file, change):
    message = planner_pb2.PlanRequest(job=job_to_proto(job_file), seed=job_file.seed, skip_baselines=True)
    change(message)
    return message


def test_bad_input_is_invalid_argument_naming_its_field(stub, job_file):
    def shrink_devices(m):
        m.job.devices.count = 1
        m.job.models[1].shape.params = 200e9

    cases = [
        (lambda m: setattr(m.job.devices, "hardware", "TPU"), "job.devices.hardware"),
        (lambda m: setattr(m.job.models[2].shape, "layers", 0), "job.models[2].shape.layers"),
        (lambda m: setattr(m.job.requests[3], "prompt_tokens", 5000), "job.requests[3].prompt_tokens"),
        (lambda m: m.job.requests[4].inputs.append("nowhere"), "job.requests[4].inputs"),
        (lambda m: m.job.edges.add(source="small-7b", target="ghost"), "job.edges"),
        (shrink_devices, "job.models[medium-13b]"),
        (lambda m: m.job.models[0].ClearField("observed_output_lengths"), "job.models[small-7b]"),
        (lambda m: m.job.models[0].observed_output_lengths.append(-3), "job.models[small-7b].output_lengths"),
        (lambda m: m.stages.add(name="old", model="x"), "stages"),
        (lambda m: setattr(m, "samples", 8), "samples"),
        (lambda m: m.ClearField("job"), "job"),
    ]
    for change, field in cases:
        with pytest.raises(grpc.RpcError) as raised:
            stub.Plan(broken(job_file, change), timeout=60)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
        assert raised.value.details().startswith(f"{field}: "), (field, raised.value.details())
        bad_request = error_details_pb2.BadRequest()
        assert rich_status_of(raised.value).details[0].Unpack(bad_request)
        assert bad_request.field_violations[0].field == field


def test_a_search_past_the_timeout_is_deadline_exceeded(start_service, job_file):
    planner = start_service("planner", "--plan-timeout-s", "0.05")
    with grpc.insecure_channel(planner.address) as channel:
        stub = planner_pb2_grpc.PlannerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            stub.Plan(planner_pb2.PlanRequest(job=job_to_proto(job_file), skip_baselines=True), timeout=60)
    assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "--plan-timeout-s" in raised.value.details()


def test_its_store_frozen_or_down_is_unavailable_and_used_again_once_it_answers(start_service):
    """Redis stops answering with its socket open (a frozen process, a cut network), then dies: a call
    needing it fails UNAVAILABLE within the command bound, not at the caller's deadline, and asks for a retry."""
    redis = start_redis()  # this test's own Redis: it freezes and kills it
    try:
        planner = start_service("planner", "--redis-url", redis.url)
        with grpc.insecure_channel(planner.address) as channel:
            stub = planner_pb2_grpc.PlannerServiceStub(channel)

            def status_code() -> tuple[grpc.StatusCode, str, float]:
                began = time.monotonic()
                with pytest.raises(grpc.RpcError) as raised:
                    next(stub.Status(planner_pb2.StatusRequest(job_id="never-planned"), timeout=60))
                return raised.value.code(), raised.value.details(), time.monotonic() - began

            assert status_code()[0] == grpc.StatusCode.NOT_FOUND  # the store answers: no such job
            redis.process.send_signal(signal.SIGSTOP)
            frozen = status_code()
            redis.process.send_signal(signal.SIGCONT)
            thawed = status_code()
            redis.process.kill()
            redis.process.wait()
            down = status_code()
    finally:
        redis.stop()
    print(f"Redis frozen: {frozen[0].name} after {frozen[2]:.2f} s; thawed: {thawed[0].name}; "
          f"dead: {down[0].name} after {down[2]:.2f} s")
    for code, details, waited_s in (frozen, down):
        assert code == grpc.StatusCode.UNAVAILABLE, (code, details)
        assert details.startswith("the shared state (Redis) cannot be reached") and details.endswith("; retry")
        assert waited_s < COMMAND_TIMEOUT_S + 5, waited_s  # the command's bound, not the call's 60 s deadline
    assert thawed[0] == grpc.StatusCode.NOT_FOUND
    assert "internal error" not in planner.log()


def forethought_plan(repo, *args):
    return subprocess.run([sys.executable, "-m", "forethought.cli", "plan", *args], cwd=repo,
                          capture_output=True, text=True, timeout=120)


def check_table(output: str, job_file) -> None:
    lines = output.splitlines()
    assert lines[0].startswith("job routing") and f"{len(job_file.job.requests)} requests on 4x A100-80GB" in lines[0]
    assert lines[1].split()[:3] == ["stage", "start_s", "est_s"]
    rows = [line.split() for line in lines[2:-1]]
    assert [row[0] for row in rows] == [str(number) for number in range(1, len(rows) + 1)]
    assert {row[-1] for row in rows} == {model.name for model in job_file.job.models}
    assert lines[-1].startswith("estimated inference time: SamuLLM ")
    assert "Max-heuristic" in lines[-1] and "Min-heuristic" in lines[-1]


def test_forethought_plan_prints_the_table_locally_and_from_the_service(repo, planner, job_file):
    local = forethought_plan(repo, JOB, "--local")
    assert local.returncode == 0, local.stderr
    check_table(local.stdout, job_file)
    remote = forethought_plan(repo, JOB, "--planner", planner.address)
    assert remote.returncode == 0, remote.stderr
    check_table(remote.stdout, job_file)
    # The same plan: every row but the first line (job id, search time) matches.
    assert remote.stdout.splitlines()[1:] == local.stdout.splitlines()[1:]


def test_forethought_plan_names_the_field_of_a_broken_file(repo, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text((repo / JOB).read_text().replace("count: 4", "count: 0"))
    result = forethought_plan(repo, str(job), "--local")
    assert result.returncode == 2
    assert "devices.count: must be in 1..72 (the devices of one node)" in result.stderr


def test_castillo_models_come_from_the_data_directory(start_service, stub, repo, tmp_path):
    """A job naming CASTILLO models: unknown ones name their field; a planner without the data says where it looked."""
    ensembling = job_to_proto(load_job_file(repo / "examples/jobs/ensembling.yaml"))
    if castillo_path().is_file():
        ensembling.models[1].castillo_model = "no--such-model"
        with pytest.raises(grpc.RpcError) as raised:
            stub.Plan(planner_pb2.PlanRequest(job=ensembling, skip_baselines=True), timeout=60)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert raised.value.details().startswith("job.models[llama-13b].output_lengths.castillo: 'no--such-model'")
    bare = start_service("planner", "--data-dir", str(tmp_path))
    with grpc.insecure_channel(bare.address) as channel:
        with pytest.raises(grpc.RpcError) as raised:
            planner_pb2_grpc.PlannerServiceStub(channel).Plan(
                planner_pb2.PlanRequest(job=ensembling, skip_baselines=True), timeout=60)
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert str(tmp_path / "castillo") in raised.value.details()


def smol_profile(path, load_s: float):
    """A calibrated profile of SmolLM2's shape with flat iteration times (what `forethought calibrate` saves)."""
    spec, hidden = MODEL_SHAPES["SmolLM2-135M"]
    flat = {1: LinearTerms(0.0, 0.0, 0.0, 0.05)}
    coefficients = LatencyCoefficients({"prefill": flat, "decode": flat})
    return save_profile(CalibratedProfile("flat", ModelNode("SmolLM2-135M", spec, hidden, 2048), 1, "test", coefficients,
                                          load_s), path)


def stored_profiles(redis_url: str, namespace: str, job_id: str) -> tuple[CalibratedProfile, ...]:
    async def read() -> tuple[CalibratedProfile, ...]:
        client = aioredis.from_url(redis_url)
        try:
            stored = await JobStore(client, namespace).get(job_id)
            assert stored is not None
            return stored.cost_profiles
        finally:
            await client.aclose()

    return asyncio.run(read())


def test_plan_simulates_a_profiled_shape_with_its_profile_and_refuses_an_unknown_one(stub, repo, tmp_path,
                                                                                      redis_server, namespace):
    small = load_job_file(repo / "examples/jobs/chain_summary_small.yaml")
    request = planner_pb2.PlanRequest(job=job_to_proto(small), seed=small.seed, skip_baselines=True)
    roofline = stub.Plan(request, timeout=60).estimated_makespan_s
    profiled = planner_pb2.PlanRequest(job=job_to_proto(small), seed=small.seed, skip_baselines=True,
                                       cost_profiles=[str(smol_profile(tmp_path / "flat.json", 100.0))])
    reply = stub.Plan(profiled, timeout=60)
    assert reply.estimated_makespan_s != roofline
    assert reply.stages[0].estimated_s > 100.0  # the profile's load time, paid by the first stage's model
    # Kept whole with the job, for a run that searches its stages again.
    assert stored_profiles(redis_server.url, namespace, reply.job_id) == (load_profile(profiled.cost_profiles[0]),)
    profiled.cost_profiles[:] = ["no-such-profile"]
    with pytest.raises(grpc.RpcError) as raised:
        stub.Plan(profiled, timeout=60)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details().startswith("cost_profiles[0]: no calibrated profile 'no-such-profile'")
