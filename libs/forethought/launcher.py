"""``forethought up``: the embedded default. Redis, every service and N workers on loopback ports.

Children die with the launcher (PR_SET_PDEATHSIG) and are stopped in reverse start order on Ctrl-C
or SIGTERM. Each leads a process group of its own, so what it started (vLLM's engine-core and model
processes) is swept with it: nothing is left running. The endpoints are written to a state file for
``status``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from forethought.cache import CACHE_ROOT
from forethought.cluster.redis_server import RedisProcess, start_redis
from forethought.rpc.channels import wait_until_serving

STATE_FILE = Path(os.environ.get("FORETHOUGHT_STATE_DIR", CACHE_ROOT)) / "up.json"
_PR_SET_PDEATHSIG = 1


def tie_to_launcher() -> None:
    """In a child before exec: lead a process group of its own, and receive SIGTERM when the launcher
    dies, however it dies."""
    os.setpgid(0, 0)
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass(frozen=True)
class UpOptions:
    workers: int = 2
    engine: str = "sim"
    model: str = "SmolLM2-135M-Instruct"
    base_port: int = 50051
    router: str = "e2"
    policy: str = "ssjf"
    predictor_model: Path | None = None  # a trained predictor folder; None runs without (FCFS, degraded)
    sim_speedup: float = 1.0
    start_timeout_s: float = 180.0
    log_format: str = "text"
    extra_worker_args: tuple[str, ...] = ()


@dataclass
class Cluster:
    """What ``up`` started: processes by name in start order, their addresses, and Redis."""

    redis: RedisProcess
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    addresses: dict[str, str] = field(default_factory=dict)

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM in reverse start order and wait for each; then SIGKILL every process group, which
        takes the stragglers and whatever a child left behind; then stop Redis."""
        for name in reversed(list(self.processes)):
            process = self.processes[name]
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for name, process in self.processes.items():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"{name} did not stop within {grace_s:.0f} s; killing it", file=sys.stderr, flush=True)
        for process in self.processes.values():
            # A group outlives its leader while a member lives: an engine process orphaned mid-shutdown.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self.redis.stop()
        STATE_FILE.unlink(missing_ok=True)

    def exited(self) -> list[str]:
        return [name for name, process in self.processes.items() if process.poll() is not None]


def plan_services(options: UpOptions, redis_url: str) -> list[tuple[str, str, list[str]]]:
    """(name, address, argv) of every process to start, in start order: backends, workers, scheduler."""
    common = ["--redis-url", redis_url, "--log-format", options.log_format]
    plan = [(name, f"127.0.0.1:{options.base_port + offset}", [name])
            for offset, name in enumerate(("tokenizer", "predictor", "demand", "planner"), start=1)]
    if options.predictor_model is None:
        plan.pop(1)
    else:
        plan[1] = ("predictor", plan[1][1], ["predictor", "--model-dir", str(options.predictor_model)])
    worker_port = options.base_port + 10
    for index in range(options.workers):
        address = f"127.0.0.1:{worker_port + index}"
        plan.append((f"worker-{index}", address, [
            "worker", "--engine", options.engine, "--model", options.model, "--worker-id", f"worker-{index}",
            "--sim-speedup", str(options.sim_speedup), *options.extra_worker_args,
        ]))
    predictor = [f"--predictor-address={address}" for name, address, _ in plan if name == "predictor"]
    plan.append(("scheduler", f"127.0.0.1:{options.base_port}", [
        "scheduler", "--tokenizer-address", plan[0][1], *predictor, "--router", options.router, "--policy", options.policy,
    ]))
    return [(name, address, [*argv, "--port", address.rpartition(":")[2], *common]) for name, address, argv in plan]


def start_cluster(options: UpOptions) -> Cluster:
    """Starts everything and waits until each service reports SERVING; stops all on failure."""
    cluster = Cluster(redis=start_redis(preexec_fn=tie_to_launcher))
    try:
        for name, address, argv in plan_services(options, cluster.redis.url):
            cluster.processes[name] = subprocess.Popen(
                [sys.executable, "-m", "forethought.cli", "serve", *argv], preexec_fn=tie_to_launcher,
                stdout=subprocess.DEVNULL,
            )
            cluster.addresses[name] = address
        asyncio.run(_wait_all(cluster, options.start_timeout_s))
    except BaseException:
        cluster.stop()
        raise
    STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
    STATE_FILE.write_text(json.dumps({"redis": cluster.redis.url, "services": cluster.addresses}, indent=2))
    return cluster


async def _wait_all(cluster: Cluster, timeout_s: float) -> None:
    waits = {name: asyncio.create_task(wait_until_serving(address, timeout_s)) for name, address in cluster.addresses.items()}
    while not all(task.done() for task in waits.values()):
        await asyncio.sleep(0.2)
        if cluster.exited():
            for task in waits.values():
                task.cancel()
            raise RuntimeError(f"{', '.join(cluster.exited())} exited during start; see its log above")
    for task in waits.values():
        task.result()


def run_up(options: UpOptions) -> int:
    """Starts the cluster, prints the endpoints, and runs until Ctrl-C or SIGTERM."""
    started = time.monotonic()
    print(f"starting Redis, services and {options.workers} {options.engine} worker(s)...", flush=True)
    cluster = start_cluster(options)
    print(f"ready in {time.monotonic() - started:.1f} s\n  redis      {cluster.redis.url}", flush=True)
    for name, address in cluster.addresses.items():
        print(f"  {name:<10} {address}", flush=True)
    print("try: forethought generate \"Tell me about the Moon\"   (Ctrl-C stops everything)", flush=True)
    stopping = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        while not stopping and not cluster.exited():
            time.sleep(0.2)
        died = cluster.exited()
    finally:
        print("\nstopping...", flush=True)
        cluster.stop()
    if died and not stopping:
        print(f"{', '.join(died)} exited unexpectedly; stopped the rest", file=sys.stderr)
        return 1
    print("stopped", flush=True)
    return 0
