"""``forethought up``: the embedded default. Redis, every service and N workers on loopback ports.

Children die with the launcher (PR_SET_PDEATHSIG) and are stopped in reverse start order on Ctrl-C
or SIGTERM, from the launcher's first instant on: during start-up too, and whatever signal dispositions
it inherited (a background job of a script inherits SIGINT ignored). Each child leads a process group
of its own, so what it started (vLLM's engine-core and model processes) is swept with it: nothing is
left running. The endpoints are written to a state file for ``status``.
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

from forethought.cache import UP_STATE_FILE
from forethought.cluster.ports import listen_failure
from forethought.cluster.redis_server import RedisProcess, start_redis
from forethought.config import ConfigError
from forethought.rpc.channels import wait_until_serving
from forethought.rpc.server import parse_settings
from forethought.services import service_spec
from forethought.services.http.readiness import wait_until_ready

_PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
PROGRESS_EVERY_S = 10.0


def tie_to_launcher() -> None:
    """In a child before exec: lead a process group of its own, receive SIGTERM when the launcher dies,
    however it dies, and take the stop signals with their default meaning (an ignored disposition or a
    blocked mask would otherwise survive exec)."""
    os.setpgid(0, 0)
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


class StopRequested(Exception):
    """Ctrl-C or SIGTERM arrived while the cluster was starting."""


class StartFailed(Exception):
    """A service exited or never reported SERVING during start-up; its own log said why."""


@dataclass
class StopSignal:
    """Records Ctrl-C and SIGTERM from the moment it is installed, whatever was inherited."""

    received: int | None = None

    def install(self) -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._record)

    def _record(self, signum: int, frame: object) -> None:
        self.received = signum

    def check(self) -> None:
        """Raises ``StopRequested`` once a stop signal has arrived."""
        if self.received is not None:
            raise StopRequested(signal.Signals(self.received).name)


LOOPBACK = "127.0.0.1"  # every service of up listens here
CHECKED_REDIS_URL = f"redis://{LOOPBACK}:6379/0"  # stands in for the Redis up starts, on a port known only then


@dataclass(frozen=True)
class UpOptions:
    workers: int = 1
    engine: str = "vllm"
    model: str = "SmolLM2-135M-Instruct"
    base_port: int = 50051
    http_port: int = 8000  # the OpenAI-compatible front door
    router: str = "e2"
    policy: str = "ssjf"
    predictor_model: Path | None = None  # a predictor artifact folder; None runs without (FCFS, degraded)
    sim_speedup: float = 1.0
    start_timeout_s: float = 180.0
    log_format: str = "text"


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
        UP_STATE_FILE.unlink(missing_ok=True)

    def exited(self) -> list[str]:
        return [name for name, process in self.processes.items() if process.poll() is not None]


def plan_services(options: UpOptions, redis_url: str) -> list[tuple[str, str, list[str]]]:
    """(name, address, argv) of every process to start, in start order: backends, workers, scheduler, HTTP front."""
    common = ["--redis-url", redis_url, "--log-format", options.log_format]
    plan = [(name, f"{LOOPBACK}:{options.base_port + offset}", [name])
            for offset, name in enumerate(("tokenizer", "predictor", "demand", "planner"), start=1)]
    if options.predictor_model is None:
        plan.pop(1)
    else:
        plan[1] = ("predictor", plan[1][1], ["predictor", "--model-dir", str(options.predictor_model)])
    worker_port = options.base_port + 10
    for index in range(options.workers):
        address = f"{LOOPBACK}:{worker_port + index}"
        plan.append((f"worker-{index}", address, [
            "worker", "--engine", options.engine, "--model", options.model, "--worker-id", f"worker-{index}",
            "--sim-speedup", str(options.sim_speedup),
        ]))
    predictor = [f"--predictor-address={address}" for name, address, _ in plan if name == "predictor"]
    demand = next(address for name, address, _ in plan if name == "demand")
    plan.append(("scheduler", f"{LOOPBACK}:{options.base_port}", [
        "scheduler", "--tokenizer-address", plan[0][1], *predictor, "--demand-address", demand, "--router", options.router,
        "--policy", options.policy,
    ]))
    plan.append(("http", f"{LOOPBACK}:{options.http_port}", ["http", "--scheduler-address", plan[-1][1]]))
    return [(name, address, [*argv, "--port", address.rpartition(":")[2], *common]) for name, address, argv in plan]


def start_cluster(options: UpOptions, stop: StopSignal | None = None) -> Cluster:
    """Starts everything and waits until each service reports SERVING, printing what it still waits for;
    stops all on failure or when ``stop`` receives a signal (``StopRequested``)."""
    stop = stop or StopSignal()
    stop.check()  # a stop that came while the caller prepared (imports, the predictor's choice)
    try:
        cluster = Cluster(redis=start_redis(preexec_fn=tie_to_launcher))
    except (FileNotFoundError, TimeoutError) as error:
        raise StartFailed(f"redis: {error}") from error
    try:
        for name, address, argv in plan_services(options, cluster.redis.url):
            stop.check()
            cluster.processes[name] = subprocess.Popen(
                [sys.executable, "-m", "forethought.cli", "serve", *argv], preexec_fn=tie_to_launcher,
                stdout=subprocess.DEVNULL,
            )
            cluster.addresses[name] = address
        asyncio.run(_wait_all(cluster, options.start_timeout_s, stop))
    except BaseException:
        cluster.stop()
        raise
    UP_STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
    UP_STATE_FILE.write_text(json.dumps({"redis": cluster.redis.url, "services": cluster.addresses}, indent=2))
    return cluster


def planned_ports(options: UpOptions) -> list[tuple[str, int, str]]:
    """(service, port, the flag that sets it) of every service ``up`` would start, in start order."""
    return [(name, int(address.rpartition(":")[2]), "--http-port" if name == "http" else "--base-port")
            for name, address, _ in plan_services(options, redis_url="")]


def options_problem(options: UpOptions) -> str | None:
    """What is wrong with ``up``'s options, or None: checked before anything starts, where a service
    refusing its setting would stop ``up`` only once the rest had started. Each service's flags as ``up``
    would pass them, with ``up``'s environment, go through that service's own rules."""
    metrics_ports: dict[int, list[str]] = {}
    for name, _, argv in plan_services(options, redis_url=CHECKED_REDIS_URL):
        try:
            settings = parse_settings(service_spec(argv[0]), argv[1:])
        except ConfigError as error:
            return f"{name}: {error}"
        if settings.metrics_port > 0:
            metrics_ports.setdefault(settings.metrics_port, []).append(name)
    for port, names in metrics_ports.items():
        if len(names) > 1:  # up's environment reaches every service alike
            return (f"--metrics-port / FORETHOUGHT_METRICS_PORT = {port} would be the metrics port of {len(names)} services "
                    f"({', '.join(names)}); a port serves one process: set 0 (each service picks a free one and logs it) "
                    "or -1 (off)")
    return port_plan_problem(options)


def port_plan_problem(options: UpOptions) -> str | None:
    """What is wrong with the ports ``--base-port``, ``--http-port`` and ``--workers`` give ``up``'s
    services, or None: each must be a port of its own in 1..65535 (``up`` dials each to see it ready)."""
    owners: dict[int, str] = {}
    for name, port, _ in planned_ports(options):
        if not 1 <= port <= 65535:
            if name == "http":
                return f"--http-port {port}: must be in 1..65535"
            return f"--base-port {options.base_port} puts {name} on port {port}, outside 1..65535"
        if port in owners:
            return f"--http-port {options.http_port} is also {owners[port]}'s port (--base-port {options.base_port}): give each its own"
        owners[port] = name
    return None


def refuse_held_ports(options: UpOptions) -> None:
    """Raises ``StartFailed`` naming every port ``up`` would listen on that it cannot, before anything
    starts: most often another ``forethought up`` holds them."""
    held = [f"{name}'s port {port} ({flag}): {reason}" for name, port, flag in planned_ports(options)
            if (reason := listen_failure(LOOPBACK, port)) is not None]
    if held:
        raise StartFailed(f"cannot listen on {'; '.join(held)}. Another forethought up may be running "
                          f"(forethought status shows it): stop it, or pass other ports")


async def _wait_all(cluster: Cluster, timeout_s: float, stop: StopSignal) -> None:
    started = time.monotonic()
    waits = {name: asyncio.create_task(wait_until_ready(address, timeout_s) if name == "http" else wait_until_serving(address, timeout_s))
             for name, address in cluster.addresses.items()}
    next_progress = started + PROGRESS_EVERY_S
    try:
        while not all(task.done() for task in waits.values()):
            await asyncio.sleep(0.2)
            stop.check()
            if cluster.exited():
                raise StartFailed(f"{', '.join(cluster.exited())} exited during start-up; its log above says why")
            if time.monotonic() >= next_progress:
                next_progress += PROGRESS_EVERY_S
                print(f"  {time.monotonic() - started:.0f} s: waiting for {waiting_for(waits)}", flush=True)
    finally:
        for task in waits.values():
            task.cancel()
    for name, task in waits.items():
        if task.exception() is not None:
            raise StartFailed(f"{name}: {task.exception()}")


def waiting_for(waits: dict[str, asyncio.Task[None]]) -> str:
    """The services not serving yet, with what a worker is doing meanwhile."""
    pending = [name for name, task in waits.items() if not task.done()]
    return ", ".join(f"{name} (loading its engine)" if name.startswith("worker") else name for name in pending)


def run_up(options: UpOptions, stop: StopSignal | None = None) -> int:
    """Starts the cluster, prints the endpoints, and runs until Ctrl-C or SIGTERM (recorded by ``stop``,
    installed here unless the caller installed it earlier)."""
    if stop is None:
        stop = StopSignal()
        stop.install()
    try:
        refuse_held_ports(options)
    except StartFailed as error:
        print(f"forethought up: {error}", file=sys.stderr, flush=True)
        return 1
    started = time.monotonic()
    print(f"starting Redis, services and {options.workers} {options.engine} worker(s)...", flush=True)
    try:
        cluster = start_cluster(options, stop)
    except StopRequested as signum:
        print(f"stopped during start-up ({signum})", flush=True)
        return 0
    except StartFailed as error:
        print(f"forethought up: {error}; stopped everything it had started", file=sys.stderr, flush=True)
        return 1
    print(f"ready in {time.monotonic() - started:.1f} s\n  redis      {cluster.redis.url}", flush=True)
    for name, address in cluster.addresses.items():
        print(f"  {name:<10} {address}", flush=True)
    print('try: forethought generate "What is the capital of France?"   (Ctrl-C stops everything)', flush=True)
    print(f"OpenAI-compatible API: http://{cluster.addresses['http']}/v1", flush=True)
    try:
        while stop.received is None and not cluster.exited():
            time.sleep(0.2)
        died = cluster.exited()
    finally:
        print("\nstopping...", flush=True)
        cluster.stop()
    if died and stop.received is None:
        print(f"{', '.join(died)} exited unexpectedly; stopped the rest", file=sys.stderr)
        return 1
    print("stopped", flush=True)
    return 0
