"""A worker whose engine dies stops serving: its health turns NOT_SERVING, it leaves the registry and the
prefix index, and ``serve`` exits with status 1 for its supervisor to restart it; a real vLLM worker does so
when its engine core process is killed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess

import pytest
import redis.asyncio as aioredis
from forethought.cluster.registry import WorkerRegistry
from forethought.prewarm import ModelLifecycle
from forethought.rpc.channels import open_channel
from forethought.rpc.server import running_service
from forethought.services.worker.shell import SERVICE, Settings, WorkerShell, build_engine
from forethought.v1 import common_pb2, worker_pb2, worker_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


async def registered_workers(redis_url: str, namespace: str) -> list:
    redis = aioredis.from_url(redis_url)
    try:
        return await WorkerRegistry(redis, namespace).workers()
    finally:
        await redis.aclose()


class EngineFault(RuntimeError):
    """Raised inside a real sim engine's loop: an engine bug, as far as the worker can tell."""


async def test_a_worker_whose_engine_loop_died_turns_not_serving_and_asks_to_stop(redis_server, namespace) -> None:
    settings = Settings(port=0, redis_url=redis_server.url, namespace=namespace, worker_id="w-dies", sim_speedup=20,
                        heartbeat_s=0.2)
    engine = build_engine(settings, settings.model)
    failures: list[str] = []
    async with running_service(SERVICE, settings, WorkerShell(settings, ModelLifecycle(lambda model: engine)),
                               on_failure=failures.append) as address, open_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        assert (await health.Check(health_pb2.HealthCheckRequest())).status == health_pb2.HealthCheckResponse.SERVING

        def broken_step(now: float) -> None:
            raise EngineFault("injected")

        engine.core.step = broken_step  # type: ignore[method-assign]
        request = worker_pb2.WorkerServiceGenerateRequest(request_id="r", prompt_token_ids=list(range(40)), max_tokens=4,
                                                          sampling=common_pb2.SamplingParams(ignore_eos=True))
        call = worker_pb2_grpc.WorkerServiceStub(channel).Generate(request, timeout=30)
        stream = asyncio.ensure_future(call.read())  # never answered: the loop that would answer it died
        for _ in range(50):
            if failures:
                break
            await asyncio.sleep(0.1)
        assert failures == ["its engine for SmolLM2-135M-Instruct failed: the engine loop ended: EngineFault: injected"]
        status = (await health.Check(health_pb2.HealthCheckRequest())).status
        assert status == health_pb2.HealthCheckResponse.NOT_SERVING
        call.cancel()
        await asyncio.gather(stream, return_exceptions=True)
    assert await registered_workers(redis_server.url, namespace) == []  # it left on the way out


@pytest.mark.parametrize("engine", ["sim", "null"])
def test_a_serving_engine_reports_no_failure(engine: str) -> None:
    assert build_engine(Settings(engine=engine), "m").failure() is None


def engine_core_pids(worker_pid: int) -> list[int]:
    """vLLM's engine core processes in the worker's process group (vLLM names them ``VLLM::EngineCore``)."""
    listing = subprocess.run(["ps", "-eo", "pid=,pgid=,args="], capture_output=True, text=True, check=True).stdout
    rows = [line.split(None, 2) for line in listing.splitlines()]
    return [int(pid) for pid, pgid, args in rows if int(pgid) == worker_pid and args.startswith("VLLM::EngineCore")]


@pytest.mark.slow
def test_a_vllm_worker_whose_engine_core_is_killed_exits_with_status_1(start_service, redis_server, namespace):
    worker = start_service("worker", "--engine", "vllm", "--worker-id", "w-vllm-dies", timeout_s=240)
    (engine_core,) = engine_core_pids(worker.process.pid)
    os.kill(engine_core, signal.SIGKILL)
    assert worker.process.wait(timeout=60) == 1, worker.log()
    assert "the vLLM engine died" in worker.log()
    assert asyncio.run(registered_workers(redis_server.url, namespace)) == []  # it left the registry on the way out
