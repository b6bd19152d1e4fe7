"""Shared fixtures: a real Redis server, service processes on free ports, and waiting for health."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from forethought.cluster.ports import free_port
from forethought.cluster.redis_server import RedisProcess, start_redis
from grpc_health.v1 import health_pb2, health_pb2_grpc
from redis.asyncio import Redis

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisProcess]:
    """One real redis-server for the session, on a free port."""
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture
def redis_port(redis_server: RedisProcess) -> int:
    return redis_server.port


@pytest.fixture
async def redis_client(redis_port: int) -> AsyncIterator[Redis]:
    """An asyncio client of the session's Redis."""
    client = Redis(host="127.0.0.1", port=redis_port)
    yield client
    await client.aclose()


@pytest.fixture
def namespace() -> str:
    """A fresh key namespace, so tests sharing the Redis server never see each other's keys."""
    return f"test-{uuid.uuid4().hex[:10]}"


@dataclass
class ServiceProcess:
    name: str
    address: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def terminate(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, then the exit code (kills it if it outlives ``timeout_s``)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def wait_serving(address: str, timeout_s: float, process: subprocess.Popen[bytes] | None = None) -> bool:
    """Polls the standard health service (usable from sync and async tests alike)."""
    deadline = time.monotonic() + timeout_s
    # Short reconnect backoff: the default grows to minutes while the server is still starting.
    options = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
               ("grpc.max_reconnect_backoff_ms", 500)]
    with grpc.insecure_channel(address, options=options) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                return False
            try:
                if stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status == health_pb2.HealthCheckResponse.SERVING:
                    return True
            except grpc.RpcError:
                pass
            time.sleep(0.1)
    return False


@pytest.fixture(scope="session")
def quick_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny predictor trained on a few hundred real ShareGPT samples (the ``--quick`` config)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from forethought.predict.train import QUICK, train

    directory = tmp_path_factory.mktemp("predictor") / "model"
    train(QUICK, directory, progress=False)
    return directory


@pytest.fixture(name="wait_serving")
def wait_serving_fixture() -> Callable[..., bool]:
    return wait_serving


@pytest.fixture
def repo() -> Path:
    return REPO


StartService = Callable[..., ServiceProcess]


@pytest.fixture
def start_service(tmp_path: Path, redis_server: RedisProcess, namespace: str) -> Iterator[StartService]:
    """Starts ``forethought serve NAME ARGS`` on a free port and waits until it reports SERVING."""
    started: list[ServiceProcess] = []

    def start(name: str, *args: str, timeout_s: float = 60.0, env: dict[str, str] | None = None) -> ServiceProcess:
        port = free_port()
        log_path = tmp_path / f"{name}-{port}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "forethought.cli", "serve", name, "--port", str(port),
                 "--redis-url", redis_server.url, "--namespace", namespace, *args],
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, start_new_session=True,
            )
        service = ServiceProcess(name, f"127.0.0.1:{port}", process, log_path)
        started.append(service)
        if not wait_serving(service.address, timeout_s, service.process):
            raise AssertionError(f"{name} never reported SERVING; its log:\n{service.log()}")
        return service

    yield start
    for service in started:
        # The whole process group: a vLLM worker's engine runs in processes of its own, which outlive a
        # kill of the worker alone.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(service.process.pid, signal.SIGKILL)
        service.process.wait()
