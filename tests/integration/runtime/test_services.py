"""Every service starts as a real process, answers health and reflection, validates, and drains on SIGTERM."""

from __future__ import annotations

import signal

import grpc
import pytest
from forethought.rpc.errors import rich_status_of
from forethought.v1 import (
    common_pb2,
    scheduler_pb2,
    scheduler_pb2_grpc,
    worker_pb2,
    worker_pb2_grpc,
)
from google.rpc import error_details_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

FAST_SIM = ("--engine", "sim", "--sim-speedup", "20")

SERVICES = {
    "tokenizer": ((), "forethought.v1.TokenizerService"),
    "demand": ((), "forethought.v1.DemandService"),
    "planner": ((), "forethought.v1.PlannerService"),
    "worker": (FAST_SIM, "forethought.v1.WorkerService"),
    "scheduler": ((), "forethought.v1.SchedulerService"),
}


def reflected_services(address: str) -> set[str]:
    with grpc.insecure_channel(address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        replies = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
        return {service.name for reply in replies for service in reply.list_services_response.service}


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_service_serves_health_and_reflection_then_stops_cleanly(start_service, name):
    args, grpc_name = SERVICES[name]
    service = start_service(name, *args)
    listed = reflected_services(service.address)
    assert grpc_name in listed
    assert "grpc.health.v1.Health" in listed
    assert service.terminate() == 0, service.log()


def test_sigterm_drains_an_in_flight_stream_and_exits_zero(start_service):
    worker = start_service("worker", "--engine", "sim", "--sim-speedup", "2", "--grace-s", "30")
    with grpc.insecure_channel(worker.address) as channel:
        stream = worker_pb2_grpc.WorkerServiceStub(channel).Generate(
            worker_pb2.WorkerServiceGenerateRequest(
                request_id="drain-1", prompt_token_ids=list(range(1, 65)), max_tokens=60,
                sampling=common_pb2.SamplingParams(ignore_eos=True)),
            timeout=60,
        )
        first = next(stream)
        worker.process.send_signal(signal.SIGTERM)
        rest = list(stream)
    tokens = len(first.token_ids) + sum(len(reply.token_ids) for reply in rest)
    assert rest[-1].finish_reason == common_pb2.FINISH_REASON_LENGTH
    assert tokens == 60
    assert worker.process.wait(30) == 0, worker.log()


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"request_id": "", "prompt_token_ids": [1, 2], "max_tokens": 4}, "request_id"),
        ({"request_id": "a", "prompt_token_ids": [], "max_tokens": 4}, "prompt_token_ids"),
        ({"request_id": "a", "prompt_token_ids": [1, 2], "max_tokens": 0}, "max_tokens"),
        ({"request_id": "a", "prompt_token_ids": [1, 2], "max_tokens": 4,
          "sampling": common_pb2.SamplingParams(top_p=1.5)}, "sampling.top_p"),
        ({"request_id": "a", "prompt_token_ids": [1, 2], "max_tokens": 4,
          "sampling": common_pb2.SamplingParams(temperature=2.5)}, "sampling.temperature"),
        # the sim engine's KV cache holds 2048 blocks of 16 tokens: 32,768 tokens of prompt plus output
        ({"request_id": "a", "prompt_token_ids": [1] * 40_000, "max_tokens": 4}, "prompt_token_ids"),
        ({"request_id": "a", "prompt_token_ids": [1] * 30_000, "max_tokens": 5_000}, "max_tokens"),
        # the sim engine makes token ids, no text a stop string could match
        ({"request_id": "a", "prompt_token_ids": [1, 2], "max_tokens": 4,
          "sampling": common_pb2.SamplingParams(stop=["\n\n"])}, "sampling.stop"),
        # nor does a model score them
        ({"request_id": "a", "prompt_token_ids": [1, 2], "max_tokens": 4,
          "sampling": common_pb2.SamplingParams(logprobs=0)}, "sampling.logprobs"),
        ({"request_id": "a", "prompt_token_ids": [1, 2], "max_tokens": 4, "sampling": common_pb2.SamplingParams(
            structured_output=common_pb2.StructuredOutput(json_object=True))}, "sampling.structured_output"),
    ],
    ids=["empty-id", "empty-prompt", "zero-max-tokens", "top-p-above-one", "temperature-above-two", "prompt-past-the-engine",
         "output-past-the-engine", "stop-strings-without-text", "logprobs-without-a-model",
         "structured-output-without-a-model"],
)
def test_malformed_worker_request_is_invalid_argument_naming_the_field(start_service, request_fields, field):
    worker = start_service("worker", *FAST_SIM)
    with grpc.insecure_channel(worker.address) as channel:
        with pytest.raises(grpc.RpcError) as raised:
            list(worker_pb2_grpc.WorkerServiceStub(channel).Generate(worker_pb2.WorkerServiceGenerateRequest(**request_fields), timeout=10))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details().startswith(f"{field}:")
    assert worker.process.poll() is None  # a bad request never kills the process


def test_malformed_scheduler_request_is_invalid_argument_naming_the_field(start_service):
    scheduler = start_service("scheduler")
    with grpc.insecure_channel(scheduler.address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            list(stub.Generate(scheduler_pb2.GenerateRequest(model="m", token_ids=common_pb2.TokenIds(ids=[1]), max_tokens=0), timeout=10))
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert raised.value.details().startswith("max_tokens:")
        bad_request = error_details_pb2.BadRequest()
        assert rich_status_of(raised.value).details[0].Unpack(bad_request)
        assert bad_request.field_violations[0].field == "max_tokens"
        with pytest.raises(grpc.RpcError) as raised:
            list(stub.Generate(scheduler_pb2.GenerateRequest(model="m", max_tokens=3), timeout=10))
        assert raised.value.details().startswith("prompt:")


def test_a_bad_setting_stops_the_service_at_start_with_a_clear_message(tmp_path):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "forethought.cli", "serve", "worker", "--engine", "tpu"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "--engine / FORETHOUGHT_ENGINE = 'tpu': must be one of sim, vllm, null" in result.stderr



def test_a_port_a_running_service_holds_is_refused_to_a_second_naming_the_setting(start_service, redis_server, wait_serving):
    """gRPC servers share a port by default on Linux (SO_REUSEPORT): a second service there would take some
    of the first one's connections. It must stop at start instead, and the first go on serving."""
    import subprocess
    import sys

    first = start_service("demand")
    port = first.address.rpartition(":")[2]
    second = subprocess.run(
        [sys.executable, "-m", "forethought.cli", "serve", "demand", "--port", port, "--redis-url", redis_server.url],
        capture_output=True, text=True, timeout=60,
    )
    assert second.returncode == 2
    assert second.stderr == (f"forethought demand: cannot start: invalid setting --port / FORETHOUGHT_PORT = {port}: must be a "
                             "port this process can listen on at 127.0.0.1, and it cannot: Address already in use\n")
    assert wait_serving(first.address, 5, first.process)


@pytest.mark.parametrize(("service", "setting", "more"), [
    ("http", "port", ("--scheduler-address", "127.0.0.1:1")),  # uvicorn would exit with a traceback
    ("demand", "metrics_port", ()),
])
def test_a_port_another_process_holds_stops_the_service_in_one_line(service, setting, more):
    import socket
    import subprocess
    import sys

    flag = "--" + setting.replace("_", "-")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "forethought.cli", "serve", service, flag, str(port), *more],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.endswith(
        f"forethought {service}: cannot start: invalid setting {flag} / FORETHOUGHT_{setting.upper()} = {port}: must be a "
        "port this process can listen on at 127.0.0.1, and it cannot: Address already in use\n")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("service", [("scheduler",), ("demand",), ("planner",), ("worker", *FAST_SIM)],
                         ids=["scheduler", "demand", "planner", "worker"])
def test_a_service_started_before_its_redis_waits_not_serving_then_serves(service, tmp_path, wait_serving):
    """Containers come up in any order: a service whose Redis is not there yet waits for it, saying so, where
    it used to exit with a traceback; a stop signal ends the wait."""
    import subprocess
    import sys

    from forethought.cluster.ports import free_port
    from forethought.cluster.redis_server import start_redis
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from tests.integration.live_mesh import wait_until

    redis_port, port, log = free_port(), free_port(), tmp_path / "service.log"
    command = [sys.executable, "-m", "forethought.cli", "serve", *service, "--port", str(port),
               "--redis-url", f"redis://127.0.0.1:{redis_port}/0"]
    waiting = f"waiting for Redis at 127.0.0.1:{redis_port}/0"
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    redis = None
    try:
        wait_until(lambda: waiting in log.read_text(), "the service says it waits for its Redis")
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.NOT_SERVING
        redis = start_redis(redis_port)
        assert wait_serving(f"127.0.0.1:{port}", 60, process), log.read_text()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        if redis is not None:
            redis.stop()
    assert "Traceback" not in log.read_text()
    # Stopped while it waits: at once, exit status 0.
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    wait_until(lambda: waiting in log.read_text(), "the service says it waits for its Redis")
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0
    assert "stopped before it was serving" in log.read_text()
