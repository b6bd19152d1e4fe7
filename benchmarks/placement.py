"""Placement decisions per second, in process and through the scheduler service (Preble section 5.4).

Preble reports its global scheduler's throughput (245 to 2,931 requests/s). Part one measures one
scheduler replica's decision path in process against a real Redis prefix index: match the prompt's
block hashes (one round trip), then let the router choose, with 8 workers and prompts that share long
prefixes. Workers' cache events are applied after each decision, outside the timed path, as the live
workers publish them.

Part two runs the services: workers with the null engine (``--engine null``: answers at once and still
publishes cache events, so the mesh is measured, not a model), one scheduler (E2, then a router that
costs next to nothing, to tell the mesh from the router), and clients in processes of their own
sending one-token Generate calls. At saturation it measures calls/s and the CPU
each process spent per call: a replica's decisions per CPU-second is what it places with a core of its
own. At a moderate fixed rate, calls alternate between the scheduler and a worker called directly, so
the difference of their latency percentiles is what the front door adds.

Part three runs 1, 2 and 4 E2 scheduler replicas sharing one Redis and the same workers, the clients'
calls spread over the replicas in turn: decisions/s, each replica's and Redis's CPU per decision, the
decision's latency inside the schedulers (their ``forethought_placement_decision_seconds`` histograms)
and the calls' latency end to end, at saturation and at ``--rate`` (shared by ``--paced-clients``
processes), with the whole machine's busy cores meanwhile. A machine with fewer cores than the
processes cannot scale wall decisions/s; the CPU per decision of the replicas and of Redis (shared by
all) says what more cores give.

Run: ``forethought bench placement`` (``--decisions``, ``--routers``, ``--calls``, ``--clients``,
``--concurrency``, ``--rate``, ``--paced-clients``, ``--service-routers``, ``--replicas``,
``--skip-service``).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forethought.arguments import listed, names_of, or_empty, positive_int, positive_number
from forethought.cluster.ports import free_port
from forethought.cluster.redis_server import start_redis
from forethought.domain import BlockStored
from forethought.domain.block_hashes import chained_block_hashes
from forethought.prefix.redis_index import RedisPrefixIndex
from forethought.routing import ROUTER_NAMES, RoutingRequest, build_router
from redis import Redis as BlockingRedis
from redis.asyncio import Redis

from benchmarks.prometheus import HistogramReading, read_histogram
from benchmarks.report import add_output_argument

BLOCK_SIZE = 16
WORKERS = 8
MODEL = "SmolLM2-135M-Instruct"
DECISION_HISTOGRAM = "forethought_placement_decision_seconds"
BARE_RELAY = "bare-relay"
"""``--service-routers`` name of the floor run: ``benchmarks.bare_relay`` instead of the scheduler."""


@dataclass(frozen=True)
class PlacementResult:
    router: str
    batch: int  # prompts matched per Redis round trip (the placement loop takes what the workers have room for)
    decisions: int
    decisions_per_s: float
    decisions_per_cpu_s: float  # per CPU-second of the deciding thread (the Redis server's time not included)
    p50_ms: float  # per decision: from its batch's match start to its own choice
    p99_ms: float
    match_p50_ms: float  # per batch
    choose_p50_ms: float  # per decision


def shared_prefix_prompts(count: int, groups: int, seed: int) -> list[list[int]]:
    """Prompts of a Zipf-popular shared prefix (512 tokens) plus a private suffix (64..256 tokens)."""
    rng = random.Random(seed)
    prefixes = [[rng.randrange(32_000) for _ in range(512)] for _ in range(groups)]
    weights = [1 / (rank + 1) for rank in range(groups)]
    return [
        rng.choices(prefixes, weights)[0] + [rng.randrange(32_000) for _ in range(rng.randrange(64, 257))]
        for _ in range(count)
    ]


async def measure(router_name: str, port: int, decisions: int, seed: int, batch: int = 1) -> PlacementResult:
    """Places ``decisions`` prompts ``batch`` at a time: one ``match_many`` round trip, then a choice each,
    as the scheduler's placement loop does with the requests the workers have room for."""
    client = Redis(host="127.0.0.1", port=port)
    index = RedisPrefixIndex(client, namespace=f"bench-{router_name}-{batch}")
    router = build_router(router_name)
    workers = [f"worker-{i}" for i in range(WORKERS)]
    for worker_id in workers:
        router.add_worker(worker_id, now=0.0)
        await index.refresh_worker(worker_id, ttl_s=600)
    await index.load_scripts()
    prompts = shared_prefix_prompts(decisions, groups=32, seed=seed)
    totals, matches, chooses, cpu = [], [], [], 0.0
    for first in range(0, len(prompts), batch):
        numbers = range(first, min(first + batch, len(prompts)))
        hashes = [chained_block_hashes(prompts[number], BLOCK_SIZE) for number in numbers]
        start, start_cpu = time.perf_counter(), time.thread_time()
        cached = await index.match_many(hashes)
        matched = time.perf_counter()
        chosen = []
        for number, prompt_hashes, prompt_cached in zip(numbers, hashes, cached, strict=True):
            began = time.perf_counter()
            request = RoutingRequest(f"r{number}", len(prompts[number]), tuple(prompt_hashes), BLOCK_SIZE, 45.0,
                                     cached_blocks=prompt_cached)
            chosen.append(router.choose(request, now=number * 0.01))
            end = time.perf_counter()
            totals.append(end - start)
            chooses.append(end - began)
        cpu += time.thread_time() - start_cpu  # what the decisions cost this replica, however busy the machine
        matches.append(matched - start)
        for number, prompt_hashes, worker_id in zip(numbers, hashes, chosen, strict=True):
            await index.apply(worker_id, [BlockStored(tuple(prompt_hashes), 0, tuple(prompts[number]), BLOCK_SIZE)])
            if number >= 64:
                router.on_finished(f"r{number - 64}", now=number * 0.01, output_tokens=45)
    await client.aclose()
    return _summarise(router_name, batch, totals, matches, chooses, cpu)


def _summarise(name: str, batch: int, totals: list[float], matches: list[float], chooses: list[float],
               cpu_s: float) -> PlacementResult:
    ms = sorted(t * 1000 for t in totals)
    return PlacementResult(
        router=name,
        batch=batch,
        decisions=len(totals),
        decisions_per_s=len(totals) / (sum(matches) + sum(chooses)),
        decisions_per_cpu_s=len(totals) / cpu_s,
        p50_ms=statistics.median(ms),
        p99_ms=_p99(ms),
        match_p50_ms=statistics.median(matches) * 1000,
        choose_p50_ms=statistics.median(chooses) * 1000,
    )


def _p99(ordered: Sequence[float]) -> float:
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def render_table(results: Sequence[PlacementResult]) -> str:
    lines = [
        "| router | batch | decisions | decisions/s | vs e2 | decisions per CPU-s | p50 ms | p99 ms "
        "| match p50 ms (batch) | choose p50 ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        baseline = next((b for b in results if b.router == "e2" and b.batch == r.batch), r)
        lines.append(
            f"| {r.router} | {r.batch} | {r.decisions} | {r.decisions_per_s:,.0f} | "
            f"{r.decisions_per_s / baseline.decisions_per_s:.2f}x | {r.decisions_per_cpu_s:,.0f} | "
            f"{r.p50_ms:.3f} | {r.p99_ms:.3f} | "
            f"{r.match_p50_ms:.3f} | {r.choose_p50_ms:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="forethought bench placement", description=__doc__.split("\n")[0])
    parser.add_argument("--decisions", type=positive_int, default=5000)
    parser.add_argument("--routers", type=names_of(ROUTER_NAMES), default=["e2", "cache_aware", "kv_cost", "round_robin"],
                        help=f"comma-separated, of {', '.join(ROUTER_NAMES)} (default e2,cache_aware,kv_cost,round_robin)")
    parser.add_argument("--batches", type=listed(positive_int), default=[1, 4, 8],
                        help="prompts matched per round trip, comma-separated (1: one request at a time; "
                             "4 or 8: a placement cycle with that many requests waiting)")
    parser.add_argument("--calls", type=positive_int, default=6000, help="Generate calls of each saturation run")
    parser.add_argument("--clients", type=positive_int, default=3, help="client processes of the saturation runs")
    parser.add_argument("--concurrency", type=positive_int, default=16, help="calls in flight per client process")
    parser.add_argument("--rate", type=positive_number, default=100.0, help="calls/s of the moderate-load run")
    parser.add_argument("--moderate-calls", type=positive_int, default=3000, help="calls of the moderate-load run")
    parser.add_argument("--paced-clients", type=positive_int, default=1,
                        help="client processes sharing --rate in the fixed-rate runs (more when one process "
                             "cannot send --rate)")
    parser.add_argument("--workers", type=positive_int, default=2, help="null-engine workers of the service part")
    parser.add_argument("--service-routers", type=or_empty(names_of((*ROUTER_NAMES, BARE_RELAY))),
                        default=["e2", "cache_aware", BARE_RELAY],
                        help="the scheduler's router in each service run, comma-separated (cache_aware: a router "
                             f"that costs next to nothing; {BARE_RELAY}: a front door that only relays, the gRPC "
                             f"floor; empty: no service runs; default e2,cache_aware,{BARE_RELAY})")
    parser.add_argument("--replicas", type=or_empty(listed(positive_int)), default=[1, 2, 4],
                        help="scheduler replicas of the replica runs, comma-separated (empty: no replica runs)")
    parser.add_argument("--skip-service", action="store_true", help="only the in-process part")
    parser.add_argument("--seed", type=int, default=0)
    add_output_argument(parser, "placement")
    args = parser.parse_args(argv)
    if not args.skip_service and args.calls < args.clients:  # each client process sends a share: none may be empty
        parser.error(f"argument --calls: must be at least --clients ({args.clients}), not {args.calls}")
    if not args.skip_service and args.moderate_calls < max(2, args.paced_clients):  # a call through each path, too
        parser.error(f"argument --moderate-calls: must be at least 2 and at least --paced-clients "
                     f"({args.paced_clients}), not {args.moderate_calls}")
    load_average = os.getloadavg()[0]  # other work on the machine skews every figure: say how much there was
    redis = start_redis()
    try:
        results = [asyncio.run(measure(name, redis.port, args.decisions, args.seed, batch))
                   for batch in args.batches for name in args.routers]
        with_service = not args.skip_service and bool(args.service_routers)
        with_replicas = bool(args.replicas) and not args.skip_service
        prompts = _service_prompts(args) if with_service or with_replicas else []
        service_table = _service_part(redis.port, redis.process.pid, prompts, args) if with_service else ""
        if with_replicas:
            service_table += _replicas_part(redis.port, redis.process.pid, args.replicas, prompts, args)
    finally:
        redis.stop()
    table = render_table(results)
    args.out.mkdir(parents=True, exist_ok=True)
    command = shlex.join(["forethought", "bench", "placement", *(sys.argv[1:] if argv is None else argv)])
    header = (
        f"Command: `{command}`.\n\n"
        f"Placement decisions in process against a real Redis index: {WORKERS} workers, "
        f"{args.decisions} prompts sharing 32 Zipf-popular 512-token prefixes. Load average at the start: "
        f"{load_average:.1f} on {os.cpu_count()} cores.\n\n"
    )
    (args.out / "table.md").write_text(header + table + service_table)
    print(table + service_table, end="")
    return 0


# ----- the scheduler service under gRPC load -------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where a client sends Generate calls: the scheduler, or a worker directly."""

    address: str
    scheduler: bool

    @property
    def path(self) -> str:
        return "scheduler -> worker" if self.scheduler else "worker directly"


@dataclass(frozen=True)
class Mesh:
    schedulers: list[Target]
    workers: list[Target]
    pids: dict[str, int]  # process name -> pid, for CPU accounting
    metrics_ports: list[int]  # each scheduler's Prometheus port

    @property
    def scheduler(self) -> Target:
        return self.schedulers[0]


@dataclass(frozen=True)
class ClientRun:
    """One client process's calls: first start and last end (epoch s), latencies (s) by path."""

    began: float
    ended: float
    latencies: dict[str, list[float]]


@dataclass(frozen=True)
class LoadResult:
    path: str
    calls: int
    calls_per_s: float
    p50_ms: float
    p99_ms: float
    cpu_ms_per_call: dict[str, float]  # process name -> CPU ms it spent per call
    busy_cores: float  # the whole machine's busy CPU seconds per second meanwhile, clients included


@contextmanager
def mesh_processes(redis_port: int, workers: int, router: str, replicas: int = 1) -> Iterator[Mesh]:
    """Null-engine workers and ``replicas`` schedulers (or, for ``BARE_RELAY``, the bare relay in their
    place), each a process of its own; the schedulers share the workers and the Redis namespace."""
    common = ["--redis-url", f"redis://127.0.0.1:{redis_port}/0", "--namespace", f"bench-service-{router}",
              "--log-level", "WARNING"]
    processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(name: str, *command: str) -> str:
        port = free_port()
        processes[name] = subprocess.Popen([sys.executable, "-m", *command, "--port", str(port)],
                                           env=dict(os.environ), stdout=subprocess.DEVNULL)
        return f"127.0.0.1:{port}"

    try:
        worker_addresses = [start(f"worker-{i}", "forethought.cli", "serve", "worker", *common, "--engine", "null",
                                  "--worker-id", f"null-{i}", "--model", MODEL, "--capacity", "1024")
                            for i in range(workers)]
        metrics_ports = [free_port() for _ in range(replicas)]
        schedulers = []
        for number, metrics_port in enumerate(metrics_ports):
            name = "scheduler" if replicas == 1 else f"scheduler-{number}"
            if router == BARE_RELAY:
                schedulers.append(start(name, "benchmarks.bare_relay",
                                        *(flag for address in worker_addresses for flag in ("--worker", address))))
            else:
                schedulers.append(start(name, "forethought.cli", "serve", "scheduler", *common, "--router", router,
                                        "--registry-poll-s", "0.2", "--max-waiting-per-worker", "64",
                                        "--metrics-port", str(metrics_port)))
        yield Mesh([Target(address, True) for address in schedulers], [Target(a, False) for a in worker_addresses],
                   {name: process.pid for name, process in processes.items()}, metrics_ports)
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            process.wait(timeout=30)


@dataclass(frozen=True)
class ServiceRun:
    """One mesh's measurements: saturation through each path, and the moderate-load run's two paths."""

    router: str
    saturated: list[LoadResult]  # worker directly, scheduler -> worker
    moderate: dict[str, LoadResult]  # by path


def _service_part(redis_port: int, redis_pid: int, prompts: list[list[int]], args: argparse.Namespace) -> str:
    runs = []
    for router in args.service_routers:
        with mesh_processes(redis_port, args.workers, router) as mesh:
            pids = {**mesh.pids, "redis": redis_pid}
            asyncio.run(_wait_for_workers(mesh.scheduler.address, args.workers))
            saturated = [run_clients([targets], prompts[: args.calls], args.clients, args.concurrency, 0.0, pids)[0]
                         for targets in (mesh.workers, [mesh.scheduler])]
            mixed = [target for worker in mesh.workers for target in (worker, mesh.scheduler)]
            moderate = run_clients([mixed], prompts[: args.moderate_calls], args.paced_clients, 0, args.rate, pids)
        runs.append(ServiceRun(router, saturated, {result.path: result for result in moderate}))
    return render_service_tables(args, runs)


def _service_prompts(args: argparse.Namespace) -> list[list[int]]:
    """Prompts for the saturation runs (the first ``--calls``) and the fixed-rate runs (the first ``--moderate-calls``)."""
    return shared_prefix_prompts(max(args.calls, args.moderate_calls), groups=32, seed=args.seed)


def _client_processes(count: int) -> str:
    return "one client process" if count == 1 else f"{count} client processes"


def run_clients(target_sets: list[list[Target]], prompts: list[list[int]], clients: int, concurrency: int,
                rate: float, pids: dict[str, int]) -> list[LoadResult]:
    """``clients`` processes share ``prompts``; closed loop with ``concurrency`` each, or open loop at ``rate``.

    A client cycles through its target set call by call (client ``c`` gets ``target_sets[c % len]``).
    Returns one result per path, with the CPU every process in ``pids`` spent per call of that path.
    """
    start_at = time.time() + 4.0  # every client is connected and warm by then
    jobs = [(target_sets[c % len(target_sets)], prompts[c::clients], concurrency, rate / clients, f"c{c}-{start_at}",
             start_at) for c in range(clients)]
    context = multiprocessing.get_context("spawn")
    with context.Pool(clients) as pool:
        pending = pool.starmap_async(_client_process, jobs)
        time.sleep(max(0.0, start_at - time.time()))
        cpu_before = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        machine_before, wall_before = _machine_busy_seconds(), time.monotonic()
        runs: list[ClientRun] = pending.get()
        cpu_after = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        busy_cores = (_machine_busy_seconds() - machine_before) / (time.monotonic() - wall_before)
    elapsed = max(run.ended for run in runs) - min(run.began for run in runs)
    paths = sorted({path for run in runs for path in run.latencies})
    all_calls = sum(len(latencies) for run in runs for latencies in run.latencies.values())
    cpu = {name: (cpu_after[name] - cpu_before[name]) * 1000 / all_calls for name in pids}
    results = []
    for path in paths:
        ms = sorted(latency * 1000 for run in runs for latency in run.latencies.get(path, []))
        results.append(LoadResult(path, len(ms), len(ms) / elapsed, statistics.median(ms), _p99(ms), cpu,
                                  busy_cores))
    return results


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (Linux ``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_busy_seconds() -> float:
    """CPU seconds all cores together spent busy since boot (Linux ``/proc/stat``: all but idle and iowait)."""
    ticks = [int(field) for field in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _client_process(targets: list[Target], prompts: list[list[int]], concurrency: int, rate: float, tag: str,
                    start_at: float) -> ClientRun:
    return asyncio.run(_client(targets, prompts, concurrency, rate, tag, start_at))


async def _client(targets: list[Target], prompts: list[list[int]], concurrency: int, rate: float, tag: str,
                  start_at: float) -> ClientRun:
    """Sends every prompt once, target by target in turn; warm-up calls first, not counted."""
    import grpc
    from forethought.v1 import scheduler_pb2_grpc, worker_pb2_grpc

    channels = {target.address: grpc.aio.insecure_channel(target.address) for target in targets}
    generate = {
        target: (scheduler_pb2_grpc.SchedulerServiceStub(channels[target.address]) if target.scheduler
                 else worker_pb2_grpc.WorkerServiceStub(channels[target.address])).Generate
        for target in targets
    }
    latencies: dict[str, list[float]] = {target.path: [] for target in targets}

    async def call(number: int, record: bool) -> None:
        target = targets[number % len(targets)]
        message = _generate_message(target, f"{tag}-{number}-{record}", prompts[number % len(prompts)])
        began = time.perf_counter()
        async for _ in generate[target](message, timeout=60):
            pass
        if record:
            latencies[target.path].append(time.perf_counter() - began)

    for number in range(2 * len(targets)):
        await call(number, record=False)
    await asyncio.sleep(max(0.0, start_at - time.time()))
    began = time.time()
    if rate > 0:
        await _open_loop(call, len(prompts), rate)
    else:
        await _closed_loop(call, len(prompts), concurrency)
    ended = time.time()
    for channel in channels.values():
        await channel.close()
    return ClientRun(began, ended, latencies)


Call = Callable[[int, bool], Coroutine[Any, Any, None]]


async def _closed_loop(call: Call, calls: int, concurrency: int) -> None:
    numbers = iter(range(calls))

    async def caller() -> None:
        for number in numbers:
            await call(number, True)

    await asyncio.gather(*(caller() for _ in range(concurrency)))


async def _open_loop(call: Call, calls: int, rate: float) -> None:
    """Call ``n`` starts at ``n / rate`` s, whether or not earlier calls have finished."""
    loop = asyncio.get_running_loop()
    origin = loop.time()
    tasks: list[asyncio.Task[None]] = []
    for number in range(calls):
        await asyncio.sleep(max(0.0, origin + number / rate - loop.time()))
        tasks.append(asyncio.create_task(call(number, True)))
    await asyncio.gather(*tasks)


def _generate_message(target: Target, request_id: str, tokens: list[int]) -> object:
    from forethought.v1 import common_pb2, scheduler_pb2, worker_pb2

    sampling = common_pb2.SamplingParams(ignore_eos=True)
    if target.scheduler:
        return scheduler_pb2.GenerateRequest(request_id=request_id, model=MODEL, max_tokens=1, sampling=sampling,
                                             token_ids=common_pb2.TokenIds(ids=tokens))
    return worker_pb2.WorkerServiceGenerateRequest(request_id=request_id, prompt_token_ids=tokens, max_tokens=1,
                                                   sampling=sampling)


async def _wait_for_workers(address: str, workers: int) -> None:
    """Returns once the scheduler lists every worker."""
    import grpc
    from forethought.rpc.channels import wait_until_serving
    from forethought.v1 import scheduler_pb2, scheduler_pb2_grpc

    await wait_until_serving(address, 60)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        for _ in range(300):
            listed = await stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5)
            if len(listed.workers) >= workers:
                await asyncio.sleep(0.5)  # one registry poll, so the placement loop has them too
                return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"the scheduler did not list {workers} workers")


def render_service_tables(args: argparse.Namespace, runs: list[ServiceRun]) -> str:
    names = list(runs[0].saturated[0].cpu_ms_per_call)
    lines = [
        f"\nThe services under gRPC load: {args.workers} workers with the null engine, one scheduler, one-token "
        f"Generate calls with token-id prompts. The machine has {os.cpu_count()} cores, shared by the clients, "
        "the services and Redis, so calls/s is what this machine sustains in all; CPU ms per call says where "
        "the time goes, and 1000 / the scheduler's CPU ms is its decisions per CPU-second (what one replica "
        "places with a core of its own).\n",
        f"Saturation: {args.clients} client processes x {args.concurrency} calls in flight, {args.calls} calls per path.\n",
        "| router | path | calls/s | p50 ms | p99 ms | " + " | ".join(f"{n} CPU ms/call" for n in names)
        + " | scheduler decisions per CPU-s |",
        "|---|---|---|---|---|" + "---|" * (len(names) + 1),
    ]
    for run in runs:
        for r in run.saturated:
            per_cpu_s = f"{1000 / r.cpu_ms_per_call['scheduler']:,.0f}" if r.path.startswith("scheduler") else "-"
            lines.append(f"| {run.router} | {r.path} | {r.calls_per_s:,.0f} | {r.p50_ms:.2f} | {r.p99_ms:.2f} | "
                         + " | ".join(f"{r.cpu_ms_per_call[n]:.3f}" for n in names) + f" | {per_cpu_s} |")
    lines += [
        f"\nModerate load: {args.rate:.0f} calls/s from {_client_processes(args.paced_clients)}, {args.moderate_calls} "
        "calls alternating between the scheduler and a worker called directly; added = scheduler path minus direct "
        "path.\n",
        "| router | direct p50 ms | direct p99 ms | scheduler p50 ms | scheduler p99 ms | added p50 ms | added p99 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        direct, through = run.moderate["worker directly"], run.moderate["scheduler -> worker"]
        lines.append(f"| {run.router} | {direct.p50_ms:.2f} | {direct.p99_ms:.2f} | {through.p50_ms:.2f} | "
                     f"{through.p99_ms:.2f} | {through.p50_ms - direct.p50_ms:+.2f} | {through.p99_ms - direct.p99_ms:+.2f} |")
    return "\n".join(lines) + "\n"


# ----- replicas sharing one Redis ----------------------------------------------------------------


@dataclass(frozen=True)
class Decisions:
    """The schedulers' decision latencies over one run (their histograms, merged)."""

    p50_ms: float
    p99_ms: float
    within_2ms: float  # share of decisions that took at most 2 ms


@dataclass(frozen=True)
class ReplicaRun:
    """``replicas`` E2 schedulers sharing one Redis and the workers: at saturation, and at a fixed rate."""

    replicas: int
    load: LoadResult  # saturation: the calls through the schedulers, with every process's CPU per call
    decisions: Decisions
    redis_script_ms: float  # Redis's time in scripts (match, cache events) per call, from INFO commandstats
    paced: LoadResult  # at the fixed rate
    paced_decisions: Decisions

    def scheduler_cpu_ms(self) -> float:
        """All replicas' CPU per call together."""
        return sum(ms for name, ms in self.load.cpu_ms_per_call.items() if name.startswith("scheduler"))

    def worker_cpu_ms(self) -> float:
        return sum(ms for name, ms in self.load.cpu_ms_per_call.items() if name.startswith("worker"))


def _replicas_part(redis_port: int, redis_pid: int, counts: Sequence[int], prompts: list[list[int]],
                   args: argparse.Namespace) -> str:
    redis = BlockingRedis(host="127.0.0.1", port=redis_port)
    runs = []
    try:
        for replicas in counts:
            with mesh_processes(redis_port, args.workers, "e2", replicas) as mesh:
                pids = {**mesh.pids, "redis": redis_pid}
                for scheduler in mesh.schedulers:
                    asyncio.run(_wait_for_workers(scheduler.address, args.workers))
                before = read_histogram(mesh.metrics_ports, DECISION_HISTOGRAM)
                scripts_before = _script_usec(redis)
                load = run_clients([mesh.schedulers], prompts[: args.calls], args.clients, args.concurrency, 0.0,
                                   pids)[0]
                script_ms = (_script_usec(redis) - scripts_before) / 1000 / load.calls
                middle = read_histogram(mesh.metrics_ports, DECISION_HISTOGRAM)
                paced = run_clients([mesh.schedulers], prompts[: args.moderate_calls], args.paced_clients, 0,
                                    args.rate, pids)[0]
                after = read_histogram(mesh.metrics_ports, DECISION_HISTOGRAM)
            runs.append(ReplicaRun(replicas, load, _decisions(middle - before), script_ms, paced,
                                   _decisions(after - middle)))
    finally:
        redis.close()
    return render_replica_table(args, runs)


def _script_usec(redis: BlockingRedis) -> float:
    """Microseconds Redis spent running scripts (``EVALSHA``, inner commands included) since it started."""
    stats = redis.info("commandstats")
    return float(stats.get("cmdstat_evalsha", {}).get("usec", 0))


def _decisions(reading: HistogramReading) -> Decisions:
    """The replicas' decisions of one run (their histograms added up, less what they held before it)."""
    buckets = sorted(reading.buckets.items())
    return Decisions(_bucket_quantile(buckets, 0.5) * 1000, _bucket_quantile(buckets, 0.99) * 1000,
                     _share_within(buckets, 0.002))


def _bucket_quantile(buckets: Sequence[tuple[float, float]], q: float) -> float:
    """The ``q`` quantile of a cumulative histogram, linear within the bucket it falls in (as PromQL's
    ``histogram_quantile``); the last finite bound when it falls in the ``+Inf`` bucket."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return float("nan")
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower_bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / max(count - lower_count, 1e-12)
        lower_bound, lower_count = bound, count
    return lower_bound


def _share_within(buckets: Sequence[tuple[float, float]], bound_s: float) -> float:
    """Share of the observations at most ``bound_s`` (a bucket bound, so exact)."""
    total = buckets[-1][1] if buckets else 0.0
    within = next((count for bound, count in buckets if abs(bound - bound_s) < 1e-12), float("nan"))
    return within / total if total > 0 else float("nan")


def render_replica_table(args: argparse.Namespace, runs: list[ReplicaRun]) -> str:
    lines = [
        f"\nReplicas: E2 schedulers sharing one Redis and the same {args.workers} null-engine workers, each client "
        f"taking the replicas in turn. Saturation: {args.clients} client processes x {args.concurrency} calls in "
        f"flight, {args.calls} calls. All on {os.cpu_count()} cores: calls/s is what this machine does with "
        "everything on it; the CPU per decision is what scales. Decision: inside the schedulers, from the "
        "placement cycle's prefix match to the router's choice (their histograms, merged); end to end: the "
        "one-token call at the client. Redis script time: Redis's own clock over its EVALSHA calls (INFO "
        "commandstats), so on a loaded machine it can exceed Redis's CPU. Machine busy cores: the CPU seconds per "
        f"second all {os.cpu_count()} cores spent busy during the calls (/proc/stat), clients included: near the "
        "core count, the machine is full and the tail is its queueing.\n",
        "| replicas | calls/s | scheduler CPU ms/decision (all replicas) | decisions per scheduler CPU-s | "
        "Redis CPU ms/decision | Redis script ms/decision | workers CPU ms/call | decision p50 ms | "
        "decision p99 ms | decisions <= 2 ms | end-to-end p50 ms | end-to-end p99 ms | machine busy cores |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        scheduler_ms = run.scheduler_cpu_ms()
        lines.append(
            f"| {run.replicas} | {run.load.calls_per_s:,.0f} | {scheduler_ms:.3f} | {1000 / scheduler_ms:,.0f} | "
            f"{run.load.cpu_ms_per_call['redis']:.3f} | {run.redis_script_ms:.3f} | {run.worker_cpu_ms():.3f} | "
            f"{run.decisions.p50_ms:.3f} | {run.decisions.p99_ms:.3f} | {run.decisions.within_2ms:.1%} | "
            f"{run.load.p50_ms:.2f} | {run.load.p99_ms:.2f} | {run.load.busy_cores:.1f} |")
    lines += [
        f"\nThe same replicas at {args.rate:.0f} calls/s (open loop, {_client_processes(args.paced_clients)}, "
        f"{args.moderate_calls} calls spread over the replicas): latency below saturation.\n",
        "| replicas | calls/s sent | decision p50 ms | decision p99 ms | decisions <= 2 ms | end-to-end p50 ms | "
        "end-to-end p99 ms | machine busy cores |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        lines.append(f"| {run.replicas} | {run.paced.calls_per_s:,.0f} | {run.paced_decisions.p50_ms:.3f} | "
                     f"{run.paced_decisions.p99_ms:.3f} | {run.paced_decisions.within_2ms:.1%} | "
                     f"{run.paced.p50_ms:.2f} | {run.paced.p99_ms:.2f} | {run.paced.busy_cores:.1f} |")
    lines += ["", projection(runs, 3000.0)]
    return "\n".join(lines) + "\n"


def projection(runs: Sequence[ReplicaRun], target_per_s: float) -> str:
    """What the measured CPU per decision predicts for a machine with a core per process."""
    widest = max(runs, key=lambda run: run.replicas)
    scheduler_ms = widest.scheduler_cpu_ms()
    redis_ms = widest.load.cpu_ms_per_call["redis"]
    replicas_needed = target_per_s * scheduler_ms / 1000
    redis_ceiling = 1000 / redis_ms
    return (f"Projection from the {widest.replicas}-replica run, one core per process: {target_per_s:,.0f} "
            f"decisions/s take {replicas_needed:.1f} scheduler cores ({1000 / scheduler_ms:,.0f} decisions per "
            f"replica-core-second) and {target_per_s * redis_ms / 1000:.2f} of Redis's one core; one Redis "
            f"stops the replicas at about {redis_ceiling:,.0f} decisions/s "
            f"({redis_ms * 1000:.0f} microseconds of Redis CPU per decision).")


if __name__ == "__main__":
    raise SystemExit(main())
