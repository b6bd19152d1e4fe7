"""E2 against round-robin, least-load and three anchor routers in the cluster simulator (Preble section 5.2).

Preble compares E2 with round-robin SGLang on prefix-heavy workloads (tool use, agents, long documents)
and reports mean and p99 request latency. This benchmark replays three workloads through
``forethought.sim`` with 4 and 8 engines, changing only the router (by name):

- ``mooncake``: a Mooncake-format trace (``--mooncake PATH``; without one a synthetic trace is generated
  deterministically in that format: Zipf-popular documents of 2-6 shared 512-token blocks, a private
  block per request, Poisson arrivals; see ``synthetic_mooncake_records``).
- ``sharegpt``: ShareGPT multi-turn conversations (each turn's prompt holds the earlier turns).
- ``toolprompt``: tool calls with Zipf-popular tool prompts (1,500-3,000 tokens) and short queries.

It reports mean and p99 latency and TTFT, and the cluster prefix hit ratio next to the ideal of an
infinite cache (every block seen before is a hit). Runs are 1,000 requests (500 ShareGPT turns) so the
caches and queues reach a steady state, as Preble measures after the system is stable. E2's prefill and
decode time functions are the simulated engines' cost profile. Run: ``forethought bench e2``
(``--quick`` for a smoke run, ``--requests``, ``--engines``, ``--routers``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from forethought.bench.report import LineSeries, ResultTable, add_output_argument, line_plot, progress, write_table
from forethought.costmodel import get_profile
from forethought.engine.core import EngineConfig
from forethought.prefix.hashing import chained_block_hashes
from forethought.sim.config import ClusterConfig, build_simulator
from forethought.workloads.mooncake import MOONCAKE_BLOCK_TOKENS, load_mooncake_trace
from forethought.workloads.sharegpt import load_sharegpt_conversations
from forethought.workloads.workload import Conversation, TokenSegment, TraceRequest, Workload

ROUTERS = ("e2", "round_robin", "least_load", "cache_aware", "kv_cost", "weighted")
PROFILE = "llama-7b-a100"
BLOCK_SIZE = 16
KV_BLOCKS = 4096
"""65,536 cached tokens per engine: a fraction of a workload's prompts, so caches fill and placement decides what
stays (the full A100 capacity would hold a whole workload and also makes each simulated iteration slower)."""


@dataclass(frozen=True)
class Scenario:
    """One workload at a rate scaled to the cluster: ``rate_per_engine`` requests/s per engine."""

    name: str
    rate_per_engine: float


SCENARIOS = (Scenario("mooncake", 3.0), Scenario("sharegpt", 1.0), Scenario("toolprompt", 6.0))


@dataclass(frozen=True)
class RunResult:
    workload: str
    engines: int
    router: str
    completed: int
    mean_latency_s: float
    p99_latency_s: float
    mean_ttft_s: float
    p99_ttft_s: float
    hit_ratio: float
    ideal_hit_ratio: float


def zipf_weights(count: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, count + 1) ** exponent
    return weights / weights.sum()  # type: ignore[no-any-return]


def synthetic_mooncake_records(count: int, rate_per_s: float, seed: int = 0) -> Iterator[dict[str, object]]:
    """Mooncake-format records: ``timestamp`` (ms), ``input_length``, ``output_length``, ``hash_ids``.

    200 documents of 2-6 shared blocks each, drawn with Zipf(1.1) popularity; every request adds one
    private block (its question) cut to 64-511 tokens; outputs 16-256 tokens; Poisson arrivals.
    """
    rng = np.random.default_rng(seed)
    documents = [list(range(1000 * d, 1000 * d + int(rng.integers(2, 7)))) for d in range(200)]
    popularity = zipf_weights(len(documents), 1.1)
    arrival_ms = np.cumsum(rng.exponential(1000.0 / rate_per_s, count))
    for index in range(count):
        blocks = documents[int(rng.choice(len(documents), p=popularity))] + [10_000_000 + index]
        tail = int(rng.integers(64, MOONCAKE_BLOCK_TOKENS))
        yield {"timestamp": int(arrival_ms[index]), "input_length": (len(blocks) - 1) * MOONCAKE_BLOCK_TOKENS + tail,
               "output_length": int(rng.integers(16, 257)), "hash_ids": blocks}


def mooncake_workload(count: int, rate_per_s: float, trace: Path | None, seed: int) -> Workload:
    if trace is not None:
        return Workload(requests=tuple(load_mooncake_trace(trace, limit=count)))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mooncake-synthetic.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in synthetic_mooncake_records(count, rate_per_s, seed)))
        return Workload(requests=tuple(load_mooncake_trace(path)))


def sharegpt_workload(count: int, rate_per_s: float, seed: int) -> Workload:
    """Conversations starting as a Poisson process; turns follow their predecessors after 2 s of thought."""
    conversations = load_sharegpt_conversations(limit=count * 2, max_context_tokens=4096, think_time_s=2.0)
    rng = np.random.default_rng(seed)
    chosen: list[Conversation] = []
    turns = 0
    for conversation in conversations:
        if turns >= count:
            break
        chosen.append(conversation)
        turns += len(conversation.turns)
    starts = np.cumsum(rng.exponential(1.0 / (rate_per_s * len(chosen) / max(turns, 1)), len(chosen)))
    return Workload(conversations=tuple(
        Conversation(c.conversation_id, float(start), c.turns, c.think_time_s) for c, start in zip(chosen, starts)))


def toolprompt_workload(count: int, rate_per_s: float, seed: int) -> Workload:
    """Tool calls: one of 120 tool prompts (1,500-3,000 tokens, Zipf(1.0) popularity) plus a 40-200-token query."""
    rng = np.random.default_rng(seed)
    tools = [TokenSegment("tool", tool, int(rng.integers(1500, 3001))) for tool in range(120)]
    popularity = zipf_weights(len(tools), 1.0)
    arrivals = np.cumsum(rng.exponential(1.0 / rate_per_s, count))
    requests = tuple(
        TraceRequest(
            request_id=f"tool-{index}", arrival_s=float(arrivals[index]),
            prompt=(tools[int(rng.choice(len(tools), p=popularity))],
                    TokenSegment("query", index, int(rng.integers(40, 201)))),
            output_tokens=int(rng.integers(10, 101)),
        )
        for index in range(count)
    )
    return Workload(requests=requests)


def build_workload(scenario: Scenario, engines: int, count: int, trace: Path | None, seed: int) -> Workload:
    rate = scenario.rate_per_engine * engines
    if scenario.name == "mooncake":
        return mooncake_workload(count, rate, trace, seed)
    if scenario.name == "sharegpt":
        return sharegpt_workload(count // 2, rate, seed)  # long multi-turn contexts: half the turns keep runs short
    return toolprompt_workload(count, rate, seed)


def ideal_hit_ratio(workload: Workload) -> float:
    """Prompt tokens an infinite cache would serve: leading blocks seen in any earlier prompt."""
    requests = list(workload.requests) + [turn for c in workload.conversations for turn in c.turns]
    requests.sort(key=lambda r: r.arrival_s)
    seen: set[int] = set()
    hits = total = 0
    for request in requests:
        hashes = chained_block_hashes(request.prompt_token_ids(), BLOCK_SIZE)
        depth = next((i for i, h in enumerate(hashes) if h not in seen), len(hashes))
        hits += depth * BLOCK_SIZE
        total += request.prompt_tokens
        seen.update(hashes)
    return hits / total if total else 0.0


def router_options(router: str) -> dict[str, object]:
    """E2's prefill and decode time functions are the simulated engines' own cost profile (Preble profiles
    its GPU and model offline the same way); the baselines take their sources' defaults."""
    return {"phase_times": get_profile(PROFILE)} if router == "e2" else {}


def run_one(workload: Workload, workload_name: str, engines: int, router: str, ideal: float) -> RunResult:
    config = ClusterConfig(engines=engines, profile=PROFILE, engine=EngineConfig(num_blocks=KV_BLOCKS, block_size=BLOCK_SIZE),
                           use_profile_capacity=False, router=router, router_options=router_options(router),
                           queue_policy="fcfs")
    result = build_simulator(workload, config).run()
    metrics = result.metrics().overall
    return RunResult(workload_name, engines, router, metrics.count, metrics.jct_s.mean, metrics.jct_s.p99,
                     metrics.ttft_s.mean, metrics.ttft_s.p99, metrics.prefix_hit_ratio, ideal)


def results_table(results: Sequence[RunResult], workload: str, engines: int) -> ResultTable:
    rows = [r for r in results if r.workload == workload and r.engines == engines]
    baseline = next(r for r in rows if r.router == "round_robin")
    table = ResultTable(
        ["router", "done", "mean s", "p99 s", "mean TTFT s", "p99 TTFT s", "hit ratio", "ideal",
         "mean vs RR", "p99 vs RR"],
        title=f"{workload}, {engines} engines",
    )
    for r in rows:
        table.add(r.router, r.completed, r.mean_latency_s, r.p99_latency_s, r.mean_ttft_s, r.p99_ttft_s,
                  r.hit_ratio, r.ideal_hit_ratio, f"{baseline.mean_latency_s / r.mean_latency_s:.2f}x",
                  f"{baseline.p99_latency_s / r.p99_latency_s:.2f}x")
    return table


def plot(results: Sequence[RunResult], routers: Sequence[str], out: Path) -> None:
    """Mean latency against round-robin per workload and cluster size, one line per router."""
    cases = sorted({(r.workload, r.engines) for r in results})
    labels = range(len(cases))
    series = []
    for router in routers:
        speedups = []
        for workload, engines in cases:
            rows = {r.router: r for r in results if (r.workload, r.engines) == (workload, engines)}
            speedups.append(rows["round_robin"].mean_latency_s / rows[router].mean_latency_s)
        series.append(LineSeries(router, list(labels), speedups))
    title = "Mean latency speedup over round-robin; cases: " + ", ".join(f"{i}={w}/{e}" for i, (w, e) in enumerate(cases))
    line_plot(out / "speedup.png", series, title[:120], "case", "speedup (x)", log_y=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="forethought bench e2", description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="requests (or conversation turns) per run")
    parser.add_argument("--engines", default="4,8", help="cluster sizes, comma-separated")
    parser.add_argument("--routers", default=",".join(ROUTERS))
    parser.add_argument("--workloads", default=",".join(s.name for s in SCENARIOS))
    parser.add_argument("--mooncake", type=Path, default=None, help="a Mooncake JSONL trace (default: synthetic)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="200 requests, 4 engines: a smoke run")
    add_output_argument(parser, "e2")
    args = parser.parse_args(argv)
    sizes = [4] if args.quick else [int(n) for n in args.engines.split(",")]
    count = 200 if args.quick else args.requests
    routers = [n.strip() for n in args.routers.split(",") if n.strip()]
    if "round_robin" not in routers:
        routers.append("round_robin")  # the baseline every ratio divides by
    scenarios = [s for s in SCENARIOS if s.name in args.workloads.split(",")]
    cases = [(s, e) for s in scenarios for e in sizes]
    results: list[RunResult] = []
    for scenario, engines in progress(cases, "workloads"):
        workload = build_workload(scenario, engines, count, args.mooncake, args.seed)
        ideal = ideal_hit_ratio(workload)
        results.extend(run_one(workload, scenario.name, engines, router, ideal) for router in routers)
    tables = [results_table(results, s.name, e) for s, e in cases]
    args.out.mkdir(parents=True, exist_ok=True)
    preamble = (f"E2 vs baselines in the cluster simulator ({PROFILE} cost profile, also E2's time functions; "
                f"{KV_BLOCKS} KV blocks of {BLOCK_SIZE} tokens per engine, FCFS global queue, "
                f"{count} requests per run, seed {args.seed}). Command: `forethought bench e2"
                f"{' --quick' if args.quick else ''}`. Ratios: round-robin's latency / the router's.")
    write_table(args.out / "table.md", tables, preamble)
    plot(results, routers, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
