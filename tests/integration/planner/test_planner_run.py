"""Running a planned job on real processes: a chain summary runs to its end on two sim workers through
`forethought run` with every summary forwarded; a planner killed mid-job has its run taken up by another
from Redis without redoing a finished request; bad input gets a status naming its field; a model a live worker holds is planned
without its load; a model's requests start while another model of its stage still loads, and a model stopped
while loading does not hold the run; a job runs on a real vLLM engine with an output forwarded."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from concurrent import futures

import grpc
import pytest
import redis
import redis.asyncio as aioredis
from forethought.cluster.redis_client import COMMAND_TIMEOUT_S
from forethought.cluster.registry import WorkerRecord, WorkerRegistry
from forethought.planner.job_file import job_file_from_dict, load_job_file, plan_job, resolve_cdfs
from forethought.services.planner.servicer import LEASE_RENEW_S, LEASE_TTL_S, job_to_proto
from forethought.v1 import planner_pb2, planner_pb2_grpc, worker_pb2, worker_pb2_grpc

from tests.integration.live_mesh import wait_until

SMOL = {"spec": "SmolLM2-135M", "max_seq_len": 2048}


def chain_job(documents: list[list[int]], summary_tokens: int = 24) -> dict:
    return {
        "name": "chain", "seed": 1, "devices": {"hardware": "cpu-2-cores", "count": 2},
        "models": [{"name": "summarizer", **SMOL, "max_output_tokens": summary_tokens, "output_lengths": [8, 16, 24]},
                   {"name": "evaluator", **SMOL, "max_output_tokens": 8, "output_lengths": [4, 8]}],
        "graph": {"kind": "chain_summary", "summarizer": "summarizer", "evaluator": "evaluator", "evaluations": 2,
                  "instruction_tokens": 16, "documents": documents},
    }


@pytest.fixture
def workers(start_service):
    return [start_service("worker", "--engine", "sim", "--sim-speedup", "8", "--worker-id", f"w{index}", "--capacity", "3")
            for index in (1, 2)]


@pytest.fixture
def store(redis_server, namespace):
    client = redis.Redis.from_url(redis_server.url)
    yield lambda job_id, part: {key.decode(): value for key, value in
                                client.hgetall(f"{namespace}:planner:job:{job_id}:{part}").items()}
    client.close()


def plan(stub, job: dict) -> planner_pb2.PlanResponse:
    job_file = job_file_from_dict(job, "chain")
    return stub.Plan(planner_pb2.PlanRequest(job=job_to_proto(job_file), seed=job_file.seed, skip_baselines=True),
                     timeout=60)


def last_status(stub, job_id: str, timeout_s: float = 120) -> planner_pb2.StatusResponse:
    statuses = list(stub.Status(planner_pb2.StatusRequest(job_id=job_id, interval_s=0.1), timeout=timeout_s))
    return statuses[-1]


def running_mid_way(stub, store, documents: list[list[int]], finished: int) -> planner_pb2.PlanResponse:
    """Plans and runs a chain summary of ``documents``, then waits until ``finished`` of its requests are."""
    planned = plan(stub, chain_job(documents, summary_tokens=48))
    stub.Run(planner_pb2.RunRequest(job_id=planned.job_id), timeout=30)
    deadline = time.monotonic() + 60
    while len(store(planned.job_id, "outputs")) < finished and time.monotonic() < deadline:
        time.sleep(0.05)
    return planned


def test_a_chain_summary_runs_to_its_end_with_each_summary_forwarded(repo, start_service, workers, store):
    planner = start_service("planner")
    path = repo / "examples/jobs/chain_summary_small.yaml"
    done = subprocess.run([sys.executable, "-m", "forethought.cli", "run", str(path), "--planner", planner.address,
                           "--job-id", "chain-1"], cwd=repo, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("planned chain-1: 2 stages, 9 requests")
    assert lines[-1].startswith("job chain-1: done, 9/9 requests in ")
    assert [line.split()[0] for line in lines[2:-1]] == ["1", "2"]  # one row a stage, under the header

    job_file = load_job_file(path)
    outputs = {key: json.loads(value) for key, value in store("chain-1", "outputs").items()}
    assert set(outputs) == {r.request_id for r in job_file.job.requests}
    for request in job_file.job.requests:
        # The worker saw the request's own prompt followed by every input's whole output.
        forwarded = sum(len(outputs[source]["tokens"]) for source in request.inputs)
        assert outputs[request.request_id]["prompt_tokens"] == request.prompt_tokens + forwarded, request.request_id
        assert outputs[request.request_id]["tokens"], request.request_id
    assert any(request.inputs for request in job_file.job.requests)
    assert set(store("chain-1", "sent").values()) == {b"1"}

    with grpc.insecure_channel(planner.address) as channel:
        status = last_status(planner_pb2_grpc.PlannerServiceStub(channel), "chain-1")
    assert status.state == planner_pb2.JOB_STATE_DONE and status.finished_requests == status.total_requests == 9
    assert [row.stage for row in status.stage_times] == [1, 2] and all(row.actual_s > 0 for row in status.stage_times)
    assert status.estimated_remaining_s == 0 and not status.running
    # The models the job loaded are unloaded at its end.
    for worker in workers:
        with grpc.insecure_channel(worker.address) as channel:
            with pytest.raises(grpc.RpcError) as raised:
                list(worker_pb2_grpc.WorkerServiceStub(channel).Generate(worker_pb2.WorkerServiceGenerateRequest(
                    request_id="after", prompt_token_ids=[1, 2], max_tokens=1, model="summarizer"), timeout=10))
            assert raised.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "stopped"])
def test_a_planner_lost_mid_job_has_its_run_taken_up_by_another_without_redoing_finished_requests(
        start_service, workers, store, stop):
    """Two planners share the namespace. The job runs on the first; ``Run`` sent to the second changes nothing
    (the first holds the job's lease). The first is killed, or stopped: once its lease lapses (killed) or it
    gives the lease up (stopped), the second takes the run up by itself, with no further ``Run``."""
    planner = start_service("planner")
    other = start_service("planner")
    with grpc.insecure_channel(planner.address) as channel, grpc.insecure_channel(other.address) as other_channel:
        stub = planner_pb2_grpc.PlannerServiceStub(channel)
        other_stub = planner_pb2_grpc.PlannerServiceStub(other_channel)
        planned = running_mid_way(stub, store, [[300, 300, 300, 300, 300]] * 4, 6)
        total = planned.requests
        elsewhere = other_stub.Run(planner_pb2.RunRequest(job_id=planned.job_id), timeout=30)
        assert elsewhere.state == planner_pb2.JOB_STATE_RUNNING
        assert f"running {planned.job_id}" not in other.log()  # the second planner did not start a run of its own
        before = set(store(planned.job_id, "outputs"))  # finished by the first planner, whatever it finishes next
        assert 6 <= len(before) < total, "the job should be stopped mid-way; lower the workers' --sim-speedup"
        planner.process.send_signal(stop)
        planner.process.wait(timeout=30)
        killed_at = time.monotonic()
        wait_until(lambda: "taking its run up" in other.log(), "the second planner taking the run up", 60)
        taken_up_s = time.monotonic() - killed_at
        status = last_status(other_stub, planned.job_id)
    print(f"run taken up {taken_up_s:.1f} s after its planner ended ({stop.name})")
    # Killed, its lease lapses; stopped, it gave the lease up and the next look for unheld runs finds it.
    assert taken_up_s < (LEASE_TTL_S if stop == signal.SIGKILL else 0) + 2 * LEASE_RENEW_S + 3, taken_up_s
    assert status.state == planner_pb2.JOB_STATE_DONE and status.finished_requests == total, status.error
    sent = {key: int(value) for key, value in store(planned.job_id, "sent").items()}
    assert len(store(planned.job_id, "outputs")) == total and set(sent) == set(store(planned.job_id, "outputs"))
    assert all(sent[request_id] == 1 for request_id in before)  # finished before the kill: never sent again
    # What was in flight at the kill was sent once more, nothing else.
    assert all(count <= 2 for count in sent.values()) and sum(sent.values()) - total <= total - len(before)


class RefusingWorker(worker_pb2_grpc.WorkerServiceServicer):
    """A worker whose engine cannot load any model but its own."""

    def LoadModel(self, request, context):
        context.abort(grpc.StatusCode.NOT_FOUND, f"model: {request.model!r} is not on this host")


@pytest.fixture
def refusing_worker(redis_server, namespace):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    worker_pb2_grpc.add_WorkerServiceServicer_to_server(RefusingWorker(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()

    async def register() -> None:
        client = aioredis.from_url(redis_server.url)
        await WorkerRegistry(client, namespace, ttl_s=120).heartbeat(
            WorkerRecord("refusing", f"127.0.0.1:{port}", "other-model", "sim", 8))
        await client.aclose()

    asyncio.run(register())
    yield
    server.stop(0)


def test_bad_input_gets_a_status_naming_its_field(start_service):
    planner = start_service("planner")
    with grpc.insecure_channel(planner.address) as channel:
        stub = planner_pb2_grpc.PlannerServiceStub(channel)
        def cycle(job: planner_pb2.PlanJob) -> None:
            job.edges.add(source="evaluator", target="summarizer")

        def no_memory(job: planner_pb2.PlanJob) -> None:
            job.models[0].shape.params = 200e9

        for change, field in ((cycle, "job.edges"), (no_memory, "job.models[summarizer]")):
            job = job_to_proto(job_file_from_dict(chain_job([[200]]), "bad"))
            change(job)
            with pytest.raises(grpc.RpcError) as raised:
                stub.Plan(planner_pb2.PlanRequest(job=job), timeout=60)
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert raised.value.details().startswith(f"{field}: "), raised.value.details()
        for request, code, field in (
            (planner_pb2.RunRequest(job_id="never-planned"), grpc.StatusCode.NOT_FOUND, "job_id"),
            (planner_pb2.RunRequest(), grpc.StatusCode.INVALID_ARGUMENT, "job_id"),
            (planner_pb2.RunRequest(job_id=plan(stub, chain_job([[200]])).job_id), grpc.StatusCode.FAILED_PRECONDITION,
             "no live worker"),
        ):
            with pytest.raises(grpc.RpcError) as raised:
                stub.Run(request, timeout=30)
            assert raised.value.code() == code and field in raised.value.details(), raised.value.details()
        with pytest.raises(grpc.RpcError) as raised:
            list(stub.Status(planner_pb2.StatusRequest(job_id="x", interval_s=100), timeout=10))
        assert raised.value.details().startswith("interval_s: ")


@pytest.mark.usefixtures("refusing_worker")
def test_a_model_no_worker_can_load_fails_the_job_naming_the_model(start_service):
    planner = start_service("planner")
    with grpc.insecure_channel(planner.address) as channel:
        stub = planner_pb2_grpc.PlannerServiceStub(channel)
        job_id = plan(stub, chain_job([[200]])).job_id
        stub.Run(planner_pb2.RunRequest(job_id=job_id), timeout=30)
        status = last_status(stub, job_id, timeout_s=30)
    assert status.state == planner_pb2.JOB_STATE_FAILED and status.finished_requests == 0
    assert status.error.startswith("job.models[summarizer]: no worker could load it (refusing: NOT_FOUND model: ")


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGSTOP], ids=["dies", "freezes"])
def test_a_job_finishes_on_the_workers_left_when_one_dies_or_freezes(start_service, store, stop):
    """A frozen worker closes no connection: the run learns of it from its calls' keepalive."""
    planner = start_service("planner")
    # The lost worker stays in the registry for 30 s: the run learns of its loss from its calls.
    workers = [start_service("worker", "--engine", "sim", "--sim-speedup", "8", "--worker-id", f"w{index}",
                             "--heartbeat-ttl-s", "30") for index in (1, 2)]
    with grpc.insecure_channel(planner.address) as channel:
        stub = planner_pb2_grpc.PlannerServiceStub(channel)
        planned = running_mid_way(stub, store, [[300, 300, 300, 300]] * 4, 3)
        os.killpg(workers[1].process.pid, stop)
        status = last_status(stub, planned.job_id)
    assert status.state == planner_pb2.JOB_STATE_DONE and status.finished_requests == planned.requests, status.error
    sent = [int(value) for value in store(planned.job_id, "sent").values()]
    assert max(sent) == 2  # what the lost worker held was sent again


def test_a_job_whose_store_refuses_writes_records_its_end_once_they_are_taken_and_resumes(
        start_service, workers, store, redis_server, namespace):
    """Redis refuses writes mid-job (as a primary that lost its replicas does, with ``min-replicas-to-write``):
    the job fails, and its end reaches Redis once writes are taken again instead of reading "running"."""
    planner = start_service("planner")
    with redis.Redis.from_url(redis_server.url) as admin, grpc.insecure_channel(planner.address) as channel:
        stub = planner_pb2_grpc.PlannerServiceStub(channel)
        planned = running_mid_way(stub, store, [[300, 300, 300, 300, 300]] * 4, 3)
        try:
            admin.config_set("min-replicas-to-write", 1)
            wait_until(lambda: "saving its end (failed): Redis failed" in planner.log(), "the planner's try to save the end", 30)
            stored = json.loads(admin.hget(f"{namespace}:planner:job:{planned.job_id}", "run"))
            assert stored["state"] == "running"  # the end is not written yet
        finally:
            admin.config_set("min-replicas-to-write", 0)
        failed = last_status(stub, planned.job_id, timeout_s=30)
        assert failed.state == planner_pb2.JOB_STATE_FAILED and "NOREPLICAS" in failed.error, failed.error
        assert failed.finished_requests < planned.requests
        stub.Run(planner_pb2.RunRequest(job_id=planned.job_id), timeout=30)
        status = last_status(stub, planned.job_id)
    assert status.state == planner_pb2.JOB_STATE_DONE and status.finished_requests == planned.requests, status.error


def test_a_job_waits_out_its_store_not_answering_and_finishes_in_the_same_run(start_service, workers, store, redis_server):
    """Redis stops answering mid-job for longer than a command's bound (a frozen process, a failover): the job's
    store calls time out and are tried again while the workers go on, and the job ends done in one ``Run``. The
    job client following it meanwhile gets UNAVAILABLE from the planner's ``Status`` and follows it again."""
    from forethought.client.jobs import JobClient

    planner = start_service("planner")
    with grpc.insecure_channel(planner.address) as channel, JobClient(planner.address) as jobs:
        stub = planner_pb2_grpc.PlannerServiceStub(channel)
        planned = running_mid_way(stub, store, [[300, 300, 300, 300, 300]] * 4, 3)
        with futures.ThreadPoolExecutor(1) as pool:
            followed = pool.submit(lambda: list(jobs.status(planned.job_id, interval_s=0.1)))
            time.sleep(0.5)
            redis_server.process.send_signal(signal.SIGSTOP)
            try:
                time.sleep(COMMAND_TIMEOUT_S + 3)
            finally:
                redis_server.process.send_signal(signal.SIGCONT)
            readings = followed.result(timeout=120)
    assert readings[-1].state == "DONE" and readings[-1].finished_requests == planned.requests, readings[-1].error
    assert readings[0].finished_requests < planned.requests  # it followed the job from mid-way, across the freeze
    assert ": Redis failed (Timeout" in planner.log()  # a store call did time out and was tried again


def out_of_order_job() -> dict:
    """The plan runs both models in stage 1 and expects the 7B model to finish first (the 13B model decodes
    slower and loads longer on A100s); on sim workers every model decodes alike, so the 13B model's
    shorter answers finish first."""
    requests = [{"id": f"big{i}", "model": "big", "prompt_tokens": 64, "output_tokens": 24} for i in range(16)]
    requests += [{"id": f"small{i}", "model": "small", "prompt_tokens": 64, "output_tokens": 200} for i in range(16)]
    return {"name": "order", "devices": {"hardware": "A100-80GB", "count": 4},
            "models": [{"name": "big", "spec": "Llama-2-13B"}, {"name": "small", "spec": "Llama-2-7B"}],
            "graph": {"kind": "explicit", "edges": [], "requests": requests}}


@pytest.mark.parametrize("replan", [False, True], ids=["adjust-next-stage", "replan"])
def test_models_finishing_out_of_plan_are_adjusted_or_replanned(start_service, workers, redis_server, namespace, replan):
    planner = start_service("planner")
    with grpc.insecure_channel(planner.address) as channel:
        stub = planner_pb2_grpc.PlannerServiceStub(channel)
        planned = plan(stub, out_of_order_job())
        assert list(planned.stages[0].finished_models) == ["small"] and len(planned.stages[0].placements) == 2
        stub.Run(planner_pb2.RunRequest(job_id=planned.job_id, replan=replan), timeout=30)
        status = last_status(stub, planned.job_id)
    assert status.state == planner_pb2.JOB_STATE_DONE and status.finished_requests == 32, status.error
    client = redis.Redis.from_url(redis_server.url)
    stored = planner_pb2.PlanResponse.FromString(client.hget(f"{namespace}:planner:job:{planned.job_id}", "plan"))
    client.close()
    if replan:  # stage 1 ended with big; the stages after it were searched for small alone
        assert list(stored.stages[0].finished_models) == ["big"]
        assert {p.model for stage in stored.stages[1:] for p in stage.placements} == {"small"}
    else:  # stage 2 (big alone) was passed over; small ran on to its end, in the last stage's time
        assert list(stored.stages) == list(planned.stages)
        assert [row.stage for row in status.stage_times] == [1, 2] and status.stage_times[1].actual_s > 0


def test_the_blocking_job_client_plans_runs_and_follows_a_job_file(repo, start_service, workers, tmp_path):
    from forethought.client import ClientError
    from forethought.client.jobs import JobClient
    from forethought.domain import InvalidField

    planner = start_service("planner")
    other = tmp_path / "other.yaml"  # the same job under another name: another file
    other.write_text((repo / "examples/jobs/chain_summary_small.yaml").read_text().replace(
        "name: chain_summary_small", "name: other_summary"))
    with JobClient(planner.address, timeout_s=120) as jobs:
        finished = jobs.run_file(repo / "examples/jobs/chain_summary_small.yaml", job_id="client-1")
        assert (finished.job_id, finished.state, finished.finished_requests, finished.total_requests) == ("client-1", "DONE", 9, 9)
        assert [row.stage for row in finished.stage_times] == [1, 2] and finished.finished
        again = jobs.run_file(repo / "examples/jobs/chain_summary_small.yaml", job_id="client-1")  # planned: not replanned
        assert again.state == "DONE" and again.finished_requests == 9
        assert [progress.state for progress in jobs.status("client-1")][-1] == "DONE"
        with pytest.raises(ClientError) as refused:
            jobs.run("no-such-job")
        with pytest.raises(InvalidField) as mixed:  # following client-1 would run it and ignore this file
            jobs.run_file(other, job_id="client-1")
    assert refused.value.code == grpc.StatusCode.NOT_FOUND
    assert mixed.value.field == "job_id" and "holds job 'chain_summary_small', not 'other_summary'" in mixed.value.rule
    command = subprocess.run([sys.executable, "-m", "forethought.cli", "run", str(other), "--job-id", "client-1",
                              "--planner", planner.address], capture_output=True, text=True, timeout=120)
    assert command.returncode == 2
    assert command.stderr.startswith("forethought run: --job-id 'client-1' holds job 'chain_summary_small', not 'other_summary'")


def test_a_model_a_worker_holds_is_planned_without_its_load(start_service, redis_server, namespace):
    planner = start_service("planner")
    job = chain_job([[300], [300], [300]])
    job_file = job_file_from_dict(job, "chain")

    def library(held: dict[str, int] | None) -> float:
        return plan_job(job_file, resolve_cdfs(job_file, None), time.perf_counter, baselines=False,
                        held=held).samullm.inference_s

    async def holders() -> list[str]:
        client = aioredis.from_url(redis_server.url)
        records = await WorkerRegistry(client, namespace).workers()
        await client.aclose()
        return [record.model for record in records]

    with grpc.insecure_channel(planner.address) as channel:
        stub = planner_pb2_grpc.PlannerServiceStub(channel)
        cold = plan(stub, job).estimated_makespan_s
        start_service("worker", "--engine", "sim", "--model", "summarizer", "--worker-id", "w-summarizer")
        wait_until(lambda: asyncio.run(holders()) == ["summarizer"], "the summarizer's worker registers")
        warm = plan(stub, job).estimated_makespan_s
    assert cold == pytest.approx(library(None))
    assert warm == pytest.approx(library({"summarizer": 1}))
    assert warm < cold


def three_model_job() -> dict:
    """Short requests of three small models, no edges: the tests below impose their own stages."""
    requests = [{"id": f"{model}{i}", "model": model, "prompt_tokens": 32, "output_tokens": 8}
                for model in ("fast", "slow", "third") for i in range(3)]
    return {"name": "loads", "devices": {"hardware": "cpu-2-cores", "count": 2},
            "models": [{"name": model, **SMOL} for model in ("fast", "slow", "third")],
            "graph": {"kind": "explicit", "edges": [], "requests": requests}}


def impose_stages(client: redis.Redis, key: str, stages: list[tuple[dict[str, tuple[int, int]], str]]) -> None:
    """Replaces the planned stages in the job store: each stage's ``{model: (replicas, gpus)}`` and the model
    it finishes."""
    planned = planner_pb2.PlanResponse.FromString(client.hget(key, "plan"))
    del planned.stages[:]
    for placements, finishing in stages:
        planned.stages.add(estimated_s=1.0, finished_models=[finishing], placements=[
            planner_pb2.ModelPlacement(model=model, replicas=dp, gpus=tp) for model, (dp, tp) in placements.items()])
    client.hset(key, "plan", planned.SerializeToString())


def run_following(stub, client: redis.Redis, key: str, job_id: str) -> list[tuple[set[str], dict[str, list[str]]]]:
    """Runs the job and snapshots (finished requests, then the run record's workers by model) until it ends.
    The outputs are read first: a snapshot's requests finished before its workers were read."""
    stub.Run(planner_pb2.RunRequest(job_id=job_id), timeout=30)
    snapshots = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        finished = {request_id.decode() for request_id in client.hkeys(f"{key}:outputs")}
        record = json.loads(client.hget(key, "run"))
        snapshots.append((finished, record["workers"]))
        if record["state"] in ("done", "failed"):
            assert record["state"] == "done", record["error"]
            return snapshots
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} still runs after 120 s")


@pytest.fixture
def slow_loading_workers(start_service):
    """w1 loads at once; w2's sim engine takes 5 s a load. A stage's first model goes to w1, its second to w2."""
    return [start_service("worker", "--engine", "sim", "--sim-speedup", "8", "--worker-id", "w1", "--capacity", "3"),
            start_service("worker", "--engine", "sim", "--sim-speedup", "8", "--worker-id", "w2", "--capacity", "3",
                          "--sim-load-s", "5")]


def run_in_stages(start_service, redis_url: str, namespace: str,
                  stages: list[tuple[dict[str, tuple[int, int]], str]]) -> tuple[list, str]:
    """Plans ``three_model_job``, runs it in ``stages`` on a new planner: the run's snapshots and the planner's log."""
    planner = start_service("planner")
    client = redis.Redis.from_url(redis_url)
    with grpc.insecure_channel(planner.address) as channel:
        stub = planner_pb2_grpc.PlannerServiceStub(channel)
        job_id = plan(stub, three_model_job()).job_id
        key = f"{namespace}:planner:job:{job_id}"
        impose_stages(client, key, stages)
        snapshots = run_following(stub, client, key, job_id)
    client.close()
    return snapshots, planner.log()


@pytest.mark.usefixtures("slow_loading_workers")
def test_a_models_requests_finish_while_another_model_of_its_stage_loads(start_service, redis_server, namespace):
    snapshots, log = run_in_stages(start_service, redis_server.url, namespace,
                                   [({"fast": (1, 1), "slow": (1, 1)}, "fast"), ({"third": (1, 1)}, "third")])
    fast = {f"fast{i}" for i in range(3)}
    # Some moment saw every request of fast finished and slow not loaded yet on w2.
    assert any(fast <= finished and "slow" not in workers for finished, workers in snapshots)
    assert any(workers.get("slow") == ["w2"] for _, workers in snapshots)
    assert len(snapshots[-1][0]) == 9
    assert "slow loaded on w2" in log


@pytest.mark.usefixtures("slow_loading_workers")
def test_a_model_stopped_while_it_loads_has_its_load_cancelled(start_service, redis_server, namespace):
    # Stage 2's model takes both devices: slow yields while w2 still loads it, and runs in stage 3 on w1.
    snapshots, log = run_in_stages(start_service, redis_server.url, namespace,
                                   [({"fast": (1, 1), "slow": (1, 1)}, "fast"), ({"third": (1, 2)}, "third"),
                                    ({"slow": (1, 1)}, "slow")])
    assert len(snapshots[-1][0]) == 9
    assert all(workers.get("slow", ["w1"]) == ["w1"] for _, workers in snapshots)  # never served from w2
    assert "slow stopped while loading on w2" in log and "slow loaded on w2" not in log
    assert log.index("slow stopped while loading on w2") < log.index("slow loaded on w1")


@pytest.mark.slow
def test_a_job_runs_on_a_real_vllm_engine_with_an_output_forwarded(repo, start_service, store, tmp_path):
    planner = start_service("planner")
    start_service("worker", "--engine", "vllm", timeout_s=240)
    model = "SmolLM2-135M-Instruct"  # the worker's own model: planned and run without a load
    job = {"name": "vllm", "seed": 1, "devices": {"hardware": "cpu-2-cores", "count": 1},
           "models": [{"name": model, **SMOL, "max_output_tokens": 12, "output_lengths": [12]}],
           "graph": {"kind": "explicit", "edges": [[model, model]], "requests": [
               {"id": "draft", "model": model, "prompt_tokens": 24},
               {"id": "review", "model": model, "prompt_tokens": 16, "inputs": ["draft"]}]}}
    path = tmp_path / "vllm_job.yaml"
    path.write_text(json.dumps(job))
    done = subprocess.run([sys.executable, "-m", "forethought.cli", "run", str(path), "--planner", planner.address,
                           "--job-id", "vllm-1"], cwd=repo, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("job vllm-1: done, 2/2 requests in ")
    outputs = {key: json.loads(value) for key, value in store("vllm-1", "outputs").items()}
    assert 0 < len(outputs["draft"]["tokens"]) <= 12
    # The engine read the review's own prompt followed by the draft's whole output.
    assert outputs["review"]["prompt_tokens"] == 16 + len(outputs["draft"]["tokens"])

    # The example for the default install: its evaluator is a second engine of the same weights, under an alias.
    example = subprocess.run([sys.executable, "-m", "forethought.cli", "run", "examples/jobs/chain_summary_vllm.yaml",
                              "--planner", planner.address, "--job-id", "vllm-example"],
                             cwd=repo, capture_output=True, text=True, timeout=300)
    assert example.returncode == 0, example.stderr
    assert example.stdout.splitlines()[-1].startswith("job vllm-example: done, 9/9 requests in ")
    # A name the engine has no weights for fails the job with the worker's reason, not an internal error.
    unknown = subprocess.run([sys.executable, "-m", "forethought.cli", "run", "examples/jobs/chain_summary_small.yaml",
                              "--planner", planner.address, "--job-id", "vllm-unknown"],
                             cwd=repo, capture_output=True, text=True, timeout=120)
    assert unknown.returncode != 0
    assert "job.models[summarizer]: no worker could load it (" in unknown.stderr, unknown.stderr
    assert ": NOT_FOUND model: model 'summarizer' is neither a known name" in unknown.stderr, unknown.stderr
