"""Benchmark ``router-memory``: the memory each router holds over a long stream of conversations.

A scheduler replica runs for days, so what a router keeps per request must leave it when the request
finishes or leaves E2's history window H (Preble section 4.2: the load, cache and TTFT history is kept
over H). Each router places the same stream in process: conversations that come back for further
turns (their earlier turns cached on the worker they were placed on, as the prefix index reports it),
a system-prompt block every prompt shares, a fixed number of requests in flight, and E2's TTFT
observations. The Python memory the router holds (``tracemalloc``) is read at checkpoints: past a few
windows it should stop growing.

``forethought bench router-memory [--requests 100000] [--rate 100] [--routers e2,cache_aware,...]``
"""

from __future__ import annotations

import argparse
import random
import tracemalloc
from collections import deque
from collections.abc import Iterator

from forethought.arguments import names_of, positive_int, positive_number
from forethought.routing import ROUTER_NAMES, RoutingRequest, build_router

from benchmarks.report import LineSeries, ResultTable, add_output_argument, line_plot, progress, write_table

BLOCK_SIZE = 16
SYSTEM_BLOCK = 1  # the chained hash of a system prompt every request opens with


def conversation_turns(count: int, workers: int, rng: random.Random) -> Iterator[RoutingRequest]:
    """``count`` turns: half open a conversation, half continue one of the last 1,000, with one more block."""
    recent: deque[int] = deque(maxlen=1_000)
    blocks_of: dict[int, tuple[int, ...]] = {}
    for number in range(count):
        if recent and rng.random() < 0.5:
            conversation = rng.choice(recent)
        else:
            conversation = number
            if len(recent) == recent.maxlen:
                del blocks_of[recent[0]]  # pushed out of ``recent``: never continued
            recent.append(conversation)
            blocks_of[conversation] = (SYSTEM_BLOCK,)
        cached = len(blocks_of[conversation])
        blocks = blocks_of[conversation] = blocks_of[conversation] + (rng.getrandbits(62),)
        holder = f"w{conversation % workers}"
        yield RoutingRequest(f"r{number}", len(blocks) * BLOCK_SIZE, blocks, BLOCK_SIZE, cached_blocks={holder: cached})


def held_memory(router_name: str, args: argparse.Namespace) -> list[float]:
    """MB the router holds after each of ``args.checkpoints`` equal shares of the stream."""
    tracemalloc.start()
    try:
        router = build_router(router_name)
        workers = [f"w{i}" for i in range(args.workers)]
        for worker in workers:
            router.add_worker(worker, 0.0)
        baseline = tracemalloc.get_traced_memory()[0]
        rng = random.Random(args.seed)
        in_flight: deque[str] = deque()
        every = max(1, args.requests // args.checkpoints)
        held: list[float] = []
        # The generator's own state is bounded (1,000 conversations) and counted alike for every router.
        for number, request in enumerate(conversation_turns(args.requests, args.workers, rng), start=1):
            now = number / args.rate
            router.choose(request, now)
            in_flight.append(request.request_id)
            if len(in_flight) > args.in_flight:
                finished = in_flight.popleft()
                observe_ttft = getattr(router, "observe_ttft", None)
                if observe_ttft is not None:
                    observe_ttft(finished, 0.05, now)
                router.on_finished(finished, now, 64)
            if number % every == 0 and len(held) < args.checkpoints:  # the remainder past the last one is not read
                held.append((tracemalloc.get_traced_memory()[0] - baseline) / 1e6)
        return held
    finally:
        tracemalloc.stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="forethought bench router-memory", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=positive_int, default=100_000, help="requests in the stream")
    parser.add_argument("--rate", type=positive_number, default=100.0, help="requests per second (sets how many windows pass)")
    parser.add_argument("--routers", type=names_of(ROUTER_NAMES), default=list(ROUTER_NAMES),
                        help=f"comma-separated router names, of {', '.join(ROUTER_NAMES)}")
    parser.add_argument("--workers", type=positive_int, default=4)
    parser.add_argument("--in-flight", type=positive_int, default=64, help="requests placed and not yet finished")
    parser.add_argument("--checkpoints", type=positive_int, default=10, help="memory readings over the stream, at most --requests")
    parser.add_argument("--seed", type=int, default=0)
    add_output_argument(parser, "router-memory")
    args = parser.parse_args(argv)
    if args.checkpoints > args.requests:  # a reading every requests // checkpoints requests: at least one
        parser.error(f"argument --checkpoints: must be at most --requests ({args.requests}), not {args.checkpoints}")

    checkpoints = [args.requests // args.checkpoints * k for k in range(1, args.checkpoints + 1)]
    half = len(checkpoints) // 2 - 1
    table = ResultTable(["router", f"MB at {checkpoints[half]:,} requests", f"MB at {checkpoints[-1]:,}",
                         "growth over the second half"],
                        title=f"Memory a router holds, {args.workers} workers, {args.rate:g} requests/s, "
                              f"{args.requests / args.rate:,.0f} s of stream")
    series = []
    for name in progress(args.routers, "routers"):
        held = held_memory(name, args)
        table.add(name, held[half], held[-1], held[-1] / held[half] if held[half] > 0 else None)
        series.append(LineSeries(name, checkpoints, held))
    command = " ".join(["forethought bench router-memory", *argv])
    write_table(args.out / "results.md", [table], preamble=f"# Router memory\n\n`{command}`")
    line_plot(args.out / "memory.png", series, "Memory a router holds over a stream of conversations",
              "requests placed", "MB (tracemalloc)")
    return 0
