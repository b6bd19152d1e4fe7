"""Overload soak: real-time and best-effort requests mixed at twice the measured capacity (BROS section 3's
classes; fair share by VTC, Sheng et al. OSDI 2024), loopback only, sim workers.

The mesh is real processes: Redis, sim workers and a scheduler with a tenants file. First a closed loop
measures capacity (completed requests per second with every worker busy). Then each configuration gets an
open-loop Poisson soak at ``--load`` times that rate, ``--rt-share`` of it real-time with a TTFT objective,
the rest best-effort, from two tenants of which one sends three times the other's traffic:

- ``shed BE first``: the ``rtbe`` order (RT ahead of BE), ``--fair-share`` between tenants, and
  ``--max-queue-best-effort`` so that past a short queue only RT requests are admitted;
- ``baseline``: FCFS, one queue limit for both classes, no fair share.

Refusals are RESOURCE_EXHAUSTED and must carry ``RetryInfo``; the table counts them by class. RT SLO
attainment is the share of RT requests sent whose first token arrived within the objective (a refused
one misses it); ``rt_attainment.png`` and a table give it per twelfth of the soak, by send time. Every
second the resident memory and CPU time of the scheduler, the workers and Redis are sampled; the services'
Prometheus histograms split each class's TTFT into its wait at the scheduler and its time at the worker.
``memory.png`` plots the memory over the shed run and the table gives each process's growth and the
cores it used in the first and the last quarter of the soak.

Run: ``forethought bench overload`` (``--quick`` for a short run; ``--soak-s``, ``--load``, ``--rt-share``,
``--ttft-slo-s``, ``--workers``, ``--sim-speedup``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import psutil
import yaml
from forethought.access import token_hash
from forethought.arguments import non_negative_int, positive_int, positive_number, share
from forethought.cluster.ports import free_port
from forethought.cluster.redis_server import start_redis
from forethought.rpc.channels import wait_until_serving
from forethought.rpc.errors import retry_delay_of
from forethought.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc

from benchmarks.prometheus import HistogramReading, read_histogram
from benchmarks.report import LineSeries, ResultTable, add_output_argument, line_plot, write_table

MODEL = "SmolLM2-135M-Instruct"
TENANTS = {"heavy": "token-heavy", "light": "token-light"}
HEAVY_SHARE = 0.75  # the heavy tenant sends three times the light one's traffic
SHED = "shed BE first"
ATTAINMENT_WINDOWS = 12  # RT SLO attainment is reported per twelfth of the soak, by send time
# Each phase (the capacity loop, then each soak) opens its prompts with its own token: the workers outlive the
# phases, and a prompt served from the cache of an earlier phase's identical one measures too much capacity.
PHASE_TOKEN = 30_010
BASELINE = "baseline"


@dataclass(frozen=True)
class Configuration:
    name: str
    scheduler_args: tuple[str, ...]


@dataclass
class Outcome:
    """One request sent in the soak: its class and tenant, and how it ended."""

    real_time: bool
    tenant: str
    sent_s: float = 0.0  # since the soak began
    status: str = "OK"
    ttft_s: float | None = None
    output_tokens: int = 0
    retry_info: bool = False


@dataclass(frozen=True)
class TtftSplit:
    """Where the RT requests' time to first token went, from the services' histograms over one soak."""

    scheduler_wait_mean_s: float  # arrival at the scheduler to placement on a worker
    worker_ttft_mean_s: float  # arrival at the worker to the first token
    worker_within_objective: float  # share of RT first tokens that the worker alone made within the objective


@dataclass
class SoakResult:
    configuration: str
    rate: float
    outcomes: list[Outcome]
    ttft_slo_s: float
    rt_split: TtftSplit | None = None
    memory: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # process -> (s, MiB)
    cpu: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # process -> (s, CPU seconds so far)

    def of(self, real_time: bool, tenant: str | None = None) -> list[Outcome]:
        return [o for o in self.outcomes if o.real_time is real_time and (tenant is None or o.tenant == tenant)]

    def rt_attainment(self, since_s: float = 0.0, until_s: float = float("inf")) -> float:
        """Share of the RT requests sent in ``[since_s, until_s)`` whose first token came within the objective."""
        rt = [o for o in self.of(True) if since_s <= o.sent_s < until_s]
        met = [o for o in rt if o.status == "OK" and o.ttft_s is not None and o.ttft_s <= self.ttft_slo_s]
        return len(met) / len(rt) if rt else float("nan")


@dataclass
class Mesh:
    redis_url: str
    redis_pid: int
    scheduler: str = ""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    metrics_ports: dict[str, int] = field(default_factory=dict)
    namespace: str = field(default_factory=lambda: f"bench-overload-{uuid.uuid4().hex[:8]}")

    def start(self, name: str, *argv: str) -> str:
        port, self.metrics_ports[name] = free_port(), free_port()
        self.processes[name] = subprocess.Popen(
            [sys.executable, "-m", "forethought.cli", "serve", *argv, "--port", str(port), "--redis-url", self.redis_url,
             "--namespace", self.namespace, "--log-level", "WARNING", "--metrics-port", str(self.metrics_ports[name])],
            stdout=subprocess.DEVNULL)
        return f"127.0.0.1:{port}"

    def stop(self, name: str) -> None:
        process = self.processes.pop(name)
        process.terminate()
        process.wait(timeout=30)

    def rt_histogram(self, names: list[str], metric: str) -> HistogramReading:
        """The RT series of histogram ``metric``, summed over the processes ``names``."""
        return read_histogram([self.metrics_ports[name] for name in names], metric, service_class="rt")

    def pids(self) -> dict[str, int]:
        return {"redis": self.redis_pid, **{name: process.pid for name, process in self.processes.items()}}


@contextmanager
def sim_workers(workers: int, sim_speedup: float, capacity: int) -> Iterator[Mesh]:
    """Redis and the sim workers; schedulers come and go per configuration."""
    redis = start_redis()
    mesh = Mesh(redis.url, redis.process.pid)
    try:
        for index in range(workers):
            mesh.start(f"worker-{index}", "worker", "--engine", "sim", "--sim-speedup", str(sim_speedup),
                       "--worker-id", f"sim-{index}", "--heartbeat-s", "0.5", "--capacity", str(capacity))
        yield mesh
    finally:
        for name in list(mesh.processes):
            mesh.stop(name)
        redis.stop()


def bearer(tenant: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {TENANTS[tenant]}"),)


async def start_scheduler(mesh: Mesh, configuration: Configuration, tenants_file: Path, workers: int) -> None:
    mesh.scheduler = mesh.start("scheduler", "scheduler", "--registry-poll-s", "0.2", "--tenants-file", str(tenants_file),
                                *configuration.scheduler_args)
    await wait_until_serving(mesh.scheduler, 120)
    async with grpc.aio.insecure_channel(mesh.scheduler) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        for _ in range(600):
            listed = await stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5, metadata=bearer("light"))
            if len(listed.workers) >= workers:
                await asyncio.sleep(0.5)  # one registry poll, so placement has them too
                return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"the scheduler did not list {workers} workers")


def request_of(phase: int, number: int, real_time: bool, max_tokens: int,
               ttft_slo_s: float) -> scheduler_pb2.GenerateRequest:
    """Request ``number`` of ``phase``: prompts of other phases, or of another of the phase's first 30,000
    numbers, share no first block with it, so none is served from another's cached prefix."""
    prompt = [PHASE_TOKEN + phase, *((number * 7 + offset) % 30000 + 10 for offset in range(63))]
    request = scheduler_pb2.GenerateRequest(
        model=MODEL, token_ids=common_pb2.TokenIds(ids=prompt), max_tokens=max_tokens,
        sampling=common_pb2.SamplingParams(ignore_eos=True), service_class=common_pb2.SERVICE_CLASS_BEST_EFFORT)
    if real_time:
        request.service_class = common_pb2.SERVICE_CLASS_REAL_TIME
        request.slo.ttft_s = ttft_slo_s
    return request


async def send(stub: scheduler_pb2_grpc.SchedulerServiceStub, request: scheduler_pb2.GenerateRequest,
               outcome: Outcome) -> Outcome:
    started = time.monotonic()
    call = stub.Generate(request, timeout=60, metadata=bearer(outcome.tenant))
    try:
        async for reply in call:
            if outcome.ttft_s is None and reply.token_ids:
                outcome.ttft_s = time.monotonic() - started
            outcome.output_tokens += len(reply.token_ids)
    except grpc.aio.AioRpcError as error:
        outcome.status = error.code().name
        outcome.retry_info = retry_delay_of(error) is not None
    return outcome


async def measure_capacity(address: str, seconds: float, concurrency: int, max_tokens: int) -> float:
    """Completed requests per second of a closed loop that keeps every worker busy."""
    completed = 0
    numbers = itertools.count(1)
    ends = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)

        async def caller() -> None:
            nonlocal completed
            while time.monotonic() < ends:
                outcome = await send(stub, request_of(0, next(numbers), False, max_tokens, 0.0), Outcome(False, "light"))
                completed += outcome.status == "OK"

        started = time.monotonic()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
    return completed / (time.monotonic() - started)


async def soak(mesh: Mesh, phase: int, configuration: str, rate: float, seconds: float, rt_share: float, ttft_slo_s: float,
               max_tokens: int, seed: int) -> SoakResult:
    """Poisson arrivals at ``rate`` for ``seconds``, memory and CPU sampled every second; waits for every answer."""
    rng = random.Random(seed)
    result = SoakResult(configuration, rate, [], ttft_slo_s)
    pids = mesh.pids()
    started = time.monotonic()

    processes = {name: psutil.Process(pid) for name, pid in pids.items()}

    async def sample_processes() -> None:
        while True:
            for name, process in processes.items():
                now = time.monotonic() - started
                cpu = process.cpu_times()
                result.memory.setdefault(name, []).append((now, process.memory_info().rss / 2**20))
                result.cpu.setdefault(name, []).append((now, cpu.user + cpu.system))
            await asyncio.sleep(1.0)

    workers = [name for name in mesh.processes if name.startswith("worker-")]
    worker_before = mesh.rt_histogram(workers, "forethought_worker_ttft_seconds")  # the workers outlive the soaks
    sampler = asyncio.create_task(sample_processes())
    async with grpc.aio.insecure_channel(mesh.scheduler) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        calls: list[asyncio.Task[Outcome]] = []
        at = started
        number = 0
        while (at := at + rng.expovariate(rate)) < started + seconds:
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            number += 1
            real_time = rng.random() < rt_share
            outcome = Outcome(real_time, "heavy" if rng.random() < HEAVY_SHARE else "light", at - started)
            calls.append(asyncio.create_task(send(stub, request_of(phase, number, real_time, max_tokens, ttft_slo_s), outcome)))
        result.outcomes = list(await asyncio.gather(*calls))
    sampler.cancel()
    worker = mesh.rt_histogram(workers, "forethought_worker_ttft_seconds") - worker_before
    waits = mesh.rt_histogram(["scheduler"], "forethought_queue_wait_seconds")
    if worker.count and waits.count:
        result.rt_split = TtftSplit(waits.total / waits.count, worker.total / worker.count,
                                    worker.buckets.get(ttft_slo_s, float("nan")) / worker.count)
    return result


def cpu_share(samples: list[tuple[float, float]], first: bool) -> float:
    """Cores the process used over the first (or last) quarter of the samples: CPU seconds over wall seconds."""
    quarter = max(2, len(samples) // 4)
    part = samples[:quarter] if first else samples[-quarter:]
    (start, cpu_start), (end, cpu_end) = part[0], part[-1]
    return (cpu_end - cpu_start) / (end - start) if end > start else float("nan")


def attainment_windows(result: SoakResult, seconds: float) -> list[tuple[float, float]]:
    """(window start s, RT SLO attainment of the requests sent in it), twelve windows over the soak."""
    width = seconds / ATTAINMENT_WINDOWS
    return [(i * width, result.rt_attainment(i * width, (i + 1) * width)) for i in range(ATTAINMENT_WINDOWS)]


def growth_mib(samples: list[tuple[float, float]]) -> float:
    """Mean RSS of the last quarter of the samples less that of the first quarter."""
    quarter = max(1, len(samples) // 4)
    return statistics.fmean(mib for _, mib in samples[-quarter:]) - statistics.fmean(mib for _, mib in samples[:quarter])


def render(args: argparse.Namespace, capacity: float, results: list[SoakResult]) -> tuple[str, list[ResultTable]]:
    classes = ResultTable(["configuration", "class", "sent", "completed", "refused (RESOURCE_EXHAUSTED)",
                           "refusals with RetryInfo", "other failures", "TTFT p50 s", "TTFT p99 s"],
                          title="By class")
    for result in results:
        for real_time in (True, False):
            outcomes = result.of(real_time)
            ttfts = sorted(o.ttft_s for o in outcomes if o.status == "OK" and o.ttft_s is not None)
            refused = [o for o in outcomes if o.status == "RESOURCE_EXHAUSTED"]
            classes.add(result.configuration, "RT" if real_time else "BE", len(outcomes),
                        sum(o.status == "OK" for o in outcomes), len(refused), sum(o.retry_info for o in refused),
                        sum(o.status not in ("OK", "RESOURCE_EXHAUSTED") for o in outcomes),
                        ttfts[len(ttfts) // 2] if ttfts else None, ttfts[min(len(ttfts) - 1, len(ttfts) * 99 // 100)] if ttfts else None)
    summary = ResultTable(["configuration", "offered req/s", "x capacity", "RT SLO attainment",
                           "BE output tok/s", "heavy: BE served / sent", "light: BE served / sent"], title="Side by side")
    for result in results:
        served = {tenant: [o for o in result.of(False, tenant) if o.status == "OK"] for tenant in TENANTS}
        summary.add(result.configuration, result.rate, result.rate / capacity, result.rt_attainment(),
                    sum(o.output_tokens for o in result.of(False) if o.status == "OK") / args.soak_s,
                    *(f"{len(served[t])} / {len(result.of(False, t))}" for t in ("heavy", "light")))
    memory = ResultTable(["configuration", "process", "RSS first quarter MiB", "RSS last quarter MiB", "growth MiB",
                          "CPU cores first quarter", "CPU cores last quarter"],
                         title="Resident memory and CPU across the soak")
    for result in results:
        for name, samples in sorted(result.memory.items()):
            quarter = max(1, len(samples) // 4)
            memory.add(result.configuration, name, statistics.fmean(m for _, m in samples[:quarter]),
                       statistics.fmean(m for _, m in samples[-quarter:]), growth_mib(samples),
                       cpu_share(result.cpu[name], first=True), cpu_share(result.cpu[name], first=False))
    split = ResultTable(["configuration", "RT mean wait at the scheduler s", "RT mean TTFT at the worker s",
                         f"RT first tokens the worker made within {args.ttft_slo_s:g} s"],
                        title="Where the RT requests' TTFT went (the services' histograms)")
    for result in results:
        if result.rt_split is not None:
            split.add(result.configuration, result.rt_split.scheduler_wait_mean_s, result.rt_split.worker_ttft_mean_s,
                      result.rt_split.worker_within_objective)
    windows = ResultTable(["configuration", *(f"{start:g} s" for start, _ in attainment_windows(results[0], args.soak_s))],
                          title="RT SLO attainment of the requests sent in each twelfth of the soak")
    for result in results:
        windows.add(result.configuration, *(share for _, share in attainment_windows(result, args.soak_s)))
    shed = next(r for r in results if r.configuration == SHED)
    preamble = (f"Command: `{' '.join(['forethought bench overload', *args.argv])}`; {args.workers} sim workers at "
                f"--sim-speedup {args.sim_speedup} and --capacity {args.worker_capacity}, {args.max_tokens} output tokens "
                f"per request, RT share {args.rt_share}, TTFT objective {args.ttft_slo_s} s, soak {args.soak_s:g} s per "
                f"configuration; load average {os.getloadavg()[0]:.1f}. Measured capacity: {capacity:.1f} requests/s. "
                f"RT SLO attainment, shed vs baseline: {shed.rt_attainment():.3f} vs "
                f"{next(r for r in results if r.configuration == BASELINE).rt_attainment():.3f}.")
    return preamble, [summary, classes, split, windows, memory]


def plot_memory(out: Path, result: SoakResult) -> Path:
    series = [LineSeries(name, [s for s, _ in samples], [mib for _, mib in samples])
              for name, samples in sorted(result.memory.items())]
    return line_plot(out / "memory.png", series, f"Resident memory, {result.configuration} soak at "
                     f"{result.rate:.1f} req/s", "seconds", "RSS (MiB)")


def plot_attainment(out: Path, results: list[SoakResult], seconds: float) -> Path:
    series = [LineSeries(result.configuration, *zip(*attainment_windows(result, seconds), strict=True))
              for result in results]
    return line_plot(out / "rt_attainment.png", series, f"RT SLO attainment (TTFT <= {results[0].ttft_slo_s:g} s) by "
                     "send time", "seconds into the soak", "share of RT requests")


def configurations(max_queue: int, best_effort_limit: int) -> list[Configuration]:
    return [  # the baseline first: its closed loop measures the capacity both soaks are offered twice of
        Configuration(BASELINE, ("--policy", "fcfs", "--max-queue", str(max_queue))),
        Configuration(SHED, ("--policy", "rtbe", "--fair-share", "--max-queue", str(max_queue),
                             "--max-queue-best-effort", str(best_effort_limit))),
    ]


async def run(args: argparse.Namespace, tenants_file: Path) -> tuple[float, list[SoakResult]]:
    results = []
    capacity = 0.0
    with sim_workers(args.workers, args.sim_speedup, args.worker_capacity) as mesh:
        for phase, configuration in enumerate(configurations(args.max_queue, args.max_queue_best_effort), start=1):
            await start_scheduler(mesh, configuration, tenants_file, args.workers)
            if not capacity:
                capacity = await measure_capacity(mesh.scheduler, args.capacity_s, args.workers * args.worker_capacity * 2,
                                                  args.max_tokens)
                print(f"capacity: {capacity:.1f} requests/s", file=sys.stderr)
            print(f"soaking {configuration.name} at {args.load * capacity:.1f} requests/s for {args.soak_s:g} s", file=sys.stderr)
            results.append(await soak(mesh, phase, configuration.name, args.load * capacity, args.soak_s, args.rt_share,
                                      args.ttft_slo_s, args.max_tokens, args.seed))
            mesh.stop("scheduler")
    return capacity, results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="forethought bench overload", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (8 s soaks) for tests")
    parser.add_argument("--soak-s", type=positive_number, default=120.0, help="seconds of open-loop load per configuration")
    parser.add_argument("--capacity-s", type=positive_number, default=15.0, help="seconds of the closed loop measuring capacity")
    parser.add_argument("--load", type=positive_number, default=2.0, help="offered rate as a multiple of the measured capacity")
    parser.add_argument("--rt-share", type=share, default=0.25, help="share of the requests that are real-time, in [0, 1]")
    parser.add_argument("--ttft-slo-s", type=positive_number, default=1.0, help="TTFT objective of the real-time requests")
    parser.add_argument("--max-tokens", type=positive_int, default=32, help="output tokens per request")
    parser.add_argument("--workers", type=positive_int, default=2, help="sim workers")
    parser.add_argument("--sim-speedup", type=positive_number, default=1.0, help="the sim workers' --sim-speedup")
    parser.add_argument("--worker-capacity", type=positive_int, default=16,
                        help="the sim workers' --capacity: requests in flight on each (its batch)")
    parser.add_argument("--max-queue", type=positive_int, default=256, help="the scheduler's --max-queue")
    parser.add_argument("--max-queue-best-effort", type=non_negative_int, default=8,
                        help="the shed configuration's --max-queue-best-effort, at most --max-queue "
                             "(0: --max-queue, no lower limit for best-effort requests)")
    parser.add_argument("--seed", type=int, default=0)
    add_output_argument(parser, "overload")
    args = parser.parse_args(argv)
    if args.max_queue_best_effort > args.max_queue:  # the scheduler would refuse to start
        parser.error(f"argument --max-queue-best-effort: must be at most --max-queue ({args.max_queue}), "
                     f"not {args.max_queue_best_effort}")
    args.argv = list(argv if argv is not None else sys.argv[1:])
    if args.quick:
        args.soak_s, args.capacity_s = 8.0, 4.0
    with tempfile.TemporaryDirectory() as folder:
        tenants_file = Path(folder) / "tenants.yaml"
        tenants_file.write_text(yaml.safe_dump({"tenants": [{"name": name, "token_sha256": token_hash(token)}
                                                            for name, token in TENANTS.items()]}))
        capacity, results = asyncio.run(run(args, tenants_file))
    preamble, tables = render(args, capacity, results)
    write_table(args.out / "table.md", tables, preamble)
    plot_memory(args.out, next(r for r in results if r.configuration == SHED))
    plot_attainment(args.out, results, args.soak_s)
    return 0
