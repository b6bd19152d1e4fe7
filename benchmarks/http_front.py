"""What the OpenAI-compatible HTTP front door adds to the time to first token, against gRPC to the scheduler.

One live sim mesh (tokenizer, sim workers, scheduler, HTTP front door, each a process of its own). From one
client process, calls alternate between two paths at a fixed rate: the official ``openai`` client streaming
``/v1/completions`` through the front door, and ``SchedulerService.Generate`` called directly with the same
text prompt, length and sampling. TTFT is measured at the caller: from sending the call to the first chunk
that carries a token. The difference of the two paths' percentiles is what HTTP adds (the front door's
JSON and SSE work, one more hop, and the openai client's own parsing); the front door's CPU per call is read
from ``/proc``.

Run: ``forethought bench http`` (``--calls``, ``--rate``, ``--max-tokens``, ``--workers``, ``--sim-speedup``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import openai
from forethought.arguments import positive_int, positive_number
from forethought.cluster.ports import free_port
from forethought.cluster.redis_server import start_redis
from forethought.rpc.channels import wait_until_serving
from forethought.services.http.readiness import wait_until_ready
from forethought.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc

from benchmarks.report import add_output_argument

MODEL = "SmolLM2-135M-Instruct"
GRPC_PATH = "gRPC -> scheduler"
HTTP_PATH = "HTTP (openai client) -> front door -> scheduler"


@dataclass(frozen=True)
class Mesh:
    scheduler: str
    http: str
    http_pid: int


@dataclass(frozen=True)
class PathResult:
    path: str
    calls: int
    p50_ms: float
    p99_ms: float
    mean_ms: float


@contextmanager
def sim_mesh(redis_url: str, workers: int, sim_speedup: float) -> Iterator[Mesh]:
    """Tokenizer, sim workers, scheduler and HTTP front door on free ports, once every one is ready."""
    common = ["--redis-url", redis_url, "--namespace", f"bench-http-{uuid.uuid4().hex[:8]}", "--log-level", "WARNING"]
    processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(name: str, *argv: str) -> str:
        port = free_port()
        processes[name] = subprocess.Popen([sys.executable, "-m", "forethought.cli", "serve", *argv, "--port", str(port), *common],
                                           stdout=subprocess.DEVNULL)
        return f"127.0.0.1:{port}"

    try:
        tokenizer = start("tokenizer", "tokenizer")
        for index in range(workers):
            start(f"worker-{index}", "worker", "--engine", "sim", "--sim-speedup", str(sim_speedup), "--worker-id", f"sim-{index}")
        scheduler = start("scheduler", "scheduler", "--tokenizer-address", tokenizer, "--registry-poll-s", "0.2")
        http = start("http", "http", "--scheduler-address", scheduler)
        asyncio.run(_ready(scheduler, http, workers))
        yield Mesh(scheduler, http, processes["http"].pid)
    finally:
        for process in reversed(list(processes.values())):
            process.terminate()
        for process in processes.values():
            process.wait(timeout=30)


async def _ready(scheduler: str, http: str, workers: int) -> None:
    await wait_until_serving(scheduler, 120)
    await wait_until_ready(http, 120)
    async with grpc.aio.insecure_channel(scheduler) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        for _ in range(600):
            if len((await stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5)).workers) >= workers:
                await asyncio.sleep(0.5)  # one registry poll, so placement has them too
                return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"the scheduler did not list {workers} workers")


def prompt_of(number: int) -> str:
    return f"Request {number}: write a short note about the history of the city of Lyon and its bridges."


async def measure(mesh: Mesh, calls: int, rate: float, max_tokens: int) -> tuple[dict[str, list[float]], float]:
    """TTFTs (s) by path, calls alternating at ``rate``; and the front door's CPU seconds over the measured calls."""
    channel = grpc.aio.insecure_channel(mesh.scheduler)
    stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
    api = openai.AsyncOpenAI(base_url=f"http://{mesh.http}/v1", api_key="unused", max_retries=0)

    async def via_grpc(number: int) -> float:
        began = time.perf_counter()
        first = 0.0
        request = scheduler_pb2.GenerateRequest(model=MODEL, text=prompt_of(number), max_tokens=max_tokens, return_text=True,
                                                sampling=common_pb2.SamplingParams(ignore_eos=True))
        async for reply in stub.Generate(request, timeout=60):
            if reply.token_ids and not first:
                first = time.perf_counter() - began
        return first

    async def via_http(number: int) -> float:
        began = time.perf_counter()
        first = 0.0
        stream = await api.completions.create(model=MODEL, prompt=prompt_of(number), max_tokens=max_tokens, stream=True,
                                              extra_body={"ignore_eos": True})
        async for chunk in stream:
            if chunk.choices and not first:
                first = time.perf_counter() - began
        return first

    paths: dict[str, Callable[[int], Awaitable[float]]] = {GRPC_PATH: via_grpc, HTTP_PATH: via_http}
    for number in range(20):  # warm-up: connections, the tokenizer's caches
        await paths[(GRPC_PATH, HTTP_PATH)[number % 2]](number)
    cpu_before = _cpu_seconds(mesh.http_pid)
    loop = asyncio.get_running_loop()
    origin = loop.time()
    tasks: list[tuple[str, asyncio.Task[float]]] = []
    for number in range(calls):
        await asyncio.sleep(max(0.0, origin + number / rate - loop.time()))
        path = (GRPC_PATH, HTTP_PATH)[number % 2]
        tasks.append((path, asyncio.create_task(paths[path](number))))
    await asyncio.gather(*(task for _, task in tasks))
    cpu = _cpu_seconds(mesh.http_pid) - cpu_before
    await api.close()
    await channel.close()
    ttfts: dict[str, list[float]] = {GRPC_PATH: [], HTTP_PATH: []}
    for path, task in tasks:
        ttfts[path].append(task.result())
    return ttfts, cpu


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (Linux ``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def summarise(path: str, ttfts: list[float]) -> PathResult:
    ms = sorted(ttft * 1000 for ttft in ttfts)
    return PathResult(path, len(ms), statistics.median(ms), ms[min(len(ms) - 1, int(0.99 * len(ms)))], statistics.fmean(ms))


def render_table(args: argparse.Namespace, results: list[PathResult], http_cpu_ms: float, load_average: float) -> str:
    direct, through = results
    lines = [
        f"`forethought bench http --calls {args.calls} --rate {args.rate:g} --max-tokens {args.max_tokens} "
        f"--workers {args.workers} --sim-speedup {args.sim_speedup:g}`\n",
        f"{args.workers} sim workers, one scheduler, one HTTP front door; {args.calls} streamed calls from one client "
        f"process, alternating paths at {args.rate:g} calls/s; {args.max_tokens} tokens each. Load average at the start: "
        f"{load_average:.1f} on {os.cpu_count()} cores.\n",
        "| path | calls | TTFT p50 ms | TTFT p99 ms | TTFT mean ms |",
        "|---|---|---|---|---|",
        *(f"| {r.path} | {r.calls} | {r.p50_ms:.2f} | {r.p99_ms:.2f} | {r.mean_ms:.2f} |" for r in results),
        f"| added by HTTP | - | {through.p50_ms - direct.p50_ms:+.2f} ({through.p50_ms / direct.p50_ms:.2f}x) | "
        f"{through.p99_ms - direct.p99_ms:+.2f} ({through.p99_ms / direct.p99_ms:.2f}x) | {through.mean_ms - direct.mean_ms:+.2f} |",
        f"\nThe front door's CPU: {http_cpu_ms:.2f} ms per HTTP call.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="forethought bench http", description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=positive_int, default=600, help="measured calls, half through each path (2 or more)")
    parser.add_argument("--rate", type=positive_number, default=10.0, help="calls/s, open loop")
    parser.add_argument("--max-tokens", type=positive_int, default=8)
    parser.add_argument("--workers", type=positive_int, default=2, help="sim workers")
    parser.add_argument("--sim-speedup", type=positive_number, default=20.0,
                        help="the sim engine's modelled time is divided by this")
    add_output_argument(parser, "http")
    args = parser.parse_args(argv)
    if args.calls < 2:
        parser.error(f"argument --calls: must be 2 or more (half go through each path), not {args.calls}")
    load_average = os.getloadavg()[0]  # other work on the machine skews every figure: say how much there was
    redis = start_redis()
    try:
        with sim_mesh(redis.url, args.workers, args.sim_speedup) as mesh:
            ttfts, cpu_s = asyncio.run(measure(mesh, args.calls, args.rate, args.max_tokens))
    finally:
        redis.stop()
    results = [summarise(path, ttfts[path]) for path in (GRPC_PATH, HTTP_PATH)]
    table = render_table(args, results, cpu_s * 1000 / len(ttfts[HTTP_PATH]), load_average)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(table)
    print(table, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
