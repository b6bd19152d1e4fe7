"""A live mesh for the tests of the doors users come through: tokenizer, workers (sim by default),
a scheduler with metrics and the HTTP front door, each a real process; and small helpers to read it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from forethought.cluster.ports import free_port
from forethought.rpc.channels import wait_until_serving
from forethought.v1 import scheduler_pb2, scheduler_pb2_grpc

MODEL = "SmolLM2-135M-Instruct"


@dataclass
class Mesh:
    """The processes of one mesh: the scheduler's gRPC address and metrics port, the HTTP front's base URL."""

    scheduler: str
    scheduler_metrics_port: int
    http: str  # http://host:port
    logs: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"{self.http}/v1"

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")


def start_process(mesh: Mesh, name: str, *argv: str) -> None:
    with (mesh.logs / f"{name}.log").open("wb") as log:
        mesh.processes[name] = subprocess.Popen([sys.executable, "-m", "forethought.cli", "serve", *argv],
                                                stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))


def wait_http(url: str, process: subprocess.Popen[bytes], timeout_s: float = 60.0) -> bool:
    """Polls ``url`` until it answers 200 (False when the process exits first or time runs out)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    return False


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"gave up waiting: {what}")


def list_workers(address: str) -> list[scheduler_pb2.WorkerInfo]:
    with grpc.insecure_channel(address) as channel:
        return list(scheduler_pb2_grpc.SchedulerServiceStub(channel).ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5).workers)


SIM_KV_BLOCKS = 512  # of 16 tokens: SmolLM2-135M's own context, so a prompt that fills it prefills in seconds
SIM_CONTEXT_TOKENS = SIM_KV_BLOCKS * 16
SIM_WORKER = ("--engine", "sim", "--sim-speedup", "5", "--sim-kv-blocks", str(SIM_KV_BLOCKS))


def start_mesh(redis_url: str, logs: Path, workers: int = 2, worker_args: tuple[str, ...] = SIM_WORKER) -> Mesh:
    """Tokenizer, ``workers`` workers (w0, w1...), a scheduler with metrics and the HTTP front, once all are ready."""
    namespace = f"http-{uuid.uuid4().hex[:8]}"
    common = ["--redis-url", redis_url, "--namespace", namespace]
    worker_names = [f"worker-{index}" for index in range(workers)]
    ports = {name: free_port() for name in ("tokenizer", *worker_names, "scheduler", "metrics", "http")}
    mesh = Mesh(f"127.0.0.1:{ports['scheduler']}", ports["metrics"], f"http://127.0.0.1:{ports['http']}", logs)
    start_process(mesh, "tokenizer", "tokenizer", "--port", str(ports["tokenizer"]), *common)
    for index, name in enumerate(worker_names):
        start_process(mesh, name, "worker", *worker_args, "--worker-id", f"w{index}", "--port", str(ports[name]),
                      "--heartbeat-s", "0.3", *common)
    start_process(mesh, "scheduler", "scheduler", "--port", str(ports["scheduler"]), "--registry-poll-s", "0.1",
                  "--tokenizer-address", f"127.0.0.1:{ports['tokenizer']}", "--metrics-port", str(ports["metrics"]), *common)
    start_process(mesh, "http", "http", "--port", str(ports["http"]), "--scheduler-address", mesh.scheduler, *common)
    for name in ("tokenizer", *worker_names, "scheduler"):
        try:
            asyncio.run(wait_until_serving(f"127.0.0.1:{ports[name]}", 300))
        except TimeoutError:
            stop_mesh(mesh)
            raise AssertionError(f"{name} never reported SERVING; its log:\n{mesh.log(name)}") from None
    if not wait_http(f"{mesh.http}/ready", mesh.processes["http"]):
        stop_mesh(mesh)
        raise AssertionError(f"the HTTP front never got ready; its log:\n{mesh.log('http')}")
    wait_until(lambda: len(list_workers(mesh.scheduler)) == workers, "every worker registered")
    time.sleep(0.3)  # the scheduler's next registry read adopts them
    return mesh


def stop_mesh(mesh: Mesh) -> None:
    for process in reversed(list(mesh.processes.values())):
        if process.poll() is None:
            process.terminate()
    for process in mesh.processes.values():
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def http_json(method: str, url: str, body: object | None = None, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], dict]:
    """(status, headers, JSON body) of one HTTP call, error statuses included."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, dict(reply.headers), json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())
