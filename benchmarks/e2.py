"""E2 against round-robin, least-load and three anchor routers in the cluster simulator (Preble section 5.2).

Preble compares E2 with round-robin SGLang on prefix-heavy workloads (tool use, agents, long documents)
and reports mean and p99 request latency. This benchmark replays four workloads through
``forethought.sim`` with 4 and 8 engines, changing only the router (by name):

- ``mooncake-trace``: the real Mooncake conversation trace (``mooncake/conversation_trace.jsonl`` in the
  data directory, or ``--mooncake PATH``): its first ``--requests`` requests, arrival times scaled to the
  rate with their bursts kept, on engines of the profile's stated KV capacity. It runs by default when the
  file is present; otherwise ``mooncake`` runs in its place.
- ``mooncake``: a synthetic trace generated deterministically in Mooncake's format: Zipf-popular documents
  of 2-6 shared 512-token blocks, a private block per request, Poisson arrivals (see
  ``synthetic_mooncake_records``).
- ``sharegpt``: ShareGPT multi-turn conversations (each turn's prompt holds the earlier turns).
- ``toolprompt``: tool calls with Zipf-popular tool prompts (1,500-3,000 tokens) and short queries.
- ``azure-tool``: the same tool calls at the arrival times of the Azure LLM inference trace's code
  requests (the trace in ``--data-dir``), scaled to the rate: Preble's Figure 8 serves its Tool workload
  in place of Azure's code requests to test placement under real, bursty load.

Like Preble's Figure 7, each workload runs at three request rates per engine (the same for every router),
up to where round-robin saturates. It reports mean and p99 latency and TTFT, and the cluster prefix hit
ratio next to the ideal of an infinite cache (every block seen before is a hit). Beside the routers stands
the contention-free bound: each request alone on an idle engine that caches every prefix served before it,
a latency no placement can beat, so round-robin's latency over it is the largest gain any router can show.
Runs are 1,000 requests (500 ShareGPT turns) so the caches and queues reach a steady state, as Preble
measures after the system is stable. E2's prefill and decode time functions are the simulated engines'
cost profile. Run:
``forethought bench e2`` (``--quick`` for a smoke run, ``--requests``, ``--engines``, ``--routers``,
``--workloads``, ``--rates``). ``--e2-rebalance-thresholds 1.15,1.5,2`` runs E2 once per Th_bal (the
baselines once) and writes a sensitivity table in place of the summary.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from forethought.arguments import input_file, listed, names_of, non_negative_int, positive_int, positive_number
from forethought.costmodel import get_profile
from forethought.domain import ServiceClass
from forethought.domain.block_hashes import chained_block_hashes
from forethought.engine.core import EngineConfig
from forethought.routing import ROUTER_NAMES
from forethought.sim.cluster import SimulationResult
from forethought.sim.config import ClusterConfig, build_simulator
from forethought.sim.metrics import Distribution, RequestRecord
from forethought.workloads.azure import azure_arrivals
from forethought.workloads.data_dir import default_data_dir
from forethought.workloads.mooncake import MOONCAKE_BLOCK_TOKENS, at_rate, load_mooncake_trace
from forethought.workloads.sharegpt import load_sharegpt_conversations
from forethought.workloads.workload import (
    Conversation,
    TokenSegment,
    TraceRequest,
    Workload,
)

from benchmarks.report import (
    LineSeries,
    ResultTable,
    add_output_argument,
    line_plot,
    write_table,
)

ROUTERS = ("e2", "round_robin", "least_load", "cache_aware", "kv_cost", "weighted")
PROFILE = "llama-7b-a100"
BLOCK_SIZE = 16
KV_BLOCKS = 4096
"""65,536 cached tokens per engine: a fraction of a workload's prompts, so caches fill and placement decides what
stays (the full A100 capacity would hold a whole workload and also makes each simulated iteration slower)."""
PRIORITY_GROUPS = EngineConfig.priority_groups
"""Preble's P (section 4.3), the engine's default. The engine orders waiting best-effort requests by these
groups and real-time ones by deadline, so with the default RT requests (no objectives) P changes nothing."""


E2_HISTORY_WINDOW_S = 30.0
"""E2's H here. The authors' 3-minute window suits runs of many minutes; the synthetic runs last 20-130 s,
so a 180 s window would make L's prefill part a sum over the whole run and leave replication (which
compares the two halves of H) without a first half. 30 s keeps H well inside every run. On the real
Mooncake trace (runs of 600-2,500 s) 180 s was measured too and is not better (docs/e2.md)."""


@dataclass(frozen=True)
class Scenario:
    """One workload at a rate scaled to the cluster: ``rate_per_engine`` requests/s per engine."""

    name: str
    rate_per_engine: float


RATES_PER_ENGINE = {"mooncake-trace": (0.05, 0.1, 0.2), "mooncake": (2.0, 3.0, 4.0), "sharegpt": (1.0, 3.0, 6.0),
                    "toolprompt": (4.0, 6.0, 8.0), "azure-tool": (4.0, 6.0, 8.0)}
"""Requests (ShareGPT: conversation turns) per second per engine. Tool prompts and Mooncake go up to the
rate where round-robin saturates (its p99 TTFT grows past 9 s); ShareGPT's conversation chains bound the
run length, so round-robin never saturates there and the rates show the decode-bound regime. For
``azure-tool`` and ``mooncake-trace`` the rate is the mean over the run: the traces' bursts go far above it.
The real Mooncake prompts average 14k tokens in the first thousand requests (p99 90k), a second or more of
prefill each, so its rates are a tenth of the synthetic one's."""

CONVERSATION_TRACE = Path("mooncake") / "conversation_trace.jsonl"
"""The real Mooncake trace, inside the data directory."""


@dataclass(frozen=True)
class Traces:
    """Where traces come from: the real Mooncake JSONL (None: absent) and the data directory (None: the default)."""

    mooncake: Path | None
    data_dir: Path | None


def conversation_trace(path: Path | None, data_dir: Path | None) -> Path | None:
    """``path``, else the conversation trace in the data directory when it is there, else None."""
    if path is not None:
        return path
    default = (data_dir or default_data_dir()) / CONVERSATION_TRACE
    return default if default.is_file() else None


@dataclass(frozen=True)
class RunResult:
    workload: str
    rate_per_engine: float
    engines: int
    router: str
    completed: int
    mean_latency_s: float
    p99_latency_s: float
    mean_ttft_s: float
    p99_ttft_s: float
    hit_ratio: float
    ideal_hit_ratio: float
    excess_ttft_s: float  # mean over requests: TTFT beyond the contention-free bound's
    excess_after_ttft_s: float  # mean over requests: time after the first token beyond the bound's


def zipf_weights(count: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, count + 1) ** exponent
    return weights / weights.sum()


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


def mooncake_trace_workload(count: int, rate_per_s: float, trace: Path | None) -> Workload:
    """The first ``count`` requests of the real trace, re-timed to a mean of ``rate_per_s``."""
    if trace is None:
        raise SystemExit(f"mooncake-trace needs the Mooncake trace: --mooncake PATH or <data dir>/{CONVERSATION_TRACE}")
    return Workload(requests=tuple(at_rate(load_mooncake_trace(trace, limit=count), rate_per_s)))


def mooncake_workload(count: int, rate_per_s: float, seed: int) -> Workload:
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


def azure_tool_workload(count: int, rate_per_s: float, data_dir: Path | None, seed: int) -> Workload:
    """``toolprompt``'s requests at the arrival times of the first ``count`` code requests of the Azure
    trace, the gaps scaled so the mean rate is ``rate_per_s`` (the bursts keep their shape)."""
    arrivals = azure_arrivals("code", count, rate_per_s, data_dir)
    tools = toolprompt_workload(count, rate_per_s, seed)
    return Workload(requests=tuple(replace(request, arrival_s=float(arrival))
                                   for request, arrival in zip(tools.requests, arrivals, strict=True)))


def build_workload(scenario: Scenario, engines: int, count: int, traces: Traces, seed: int) -> Workload:
    rate = scenario.rate_per_engine * engines
    if scenario.name == "mooncake-trace":
        return mooncake_trace_workload(count, rate, traces.mooncake)
    if scenario.name == "mooncake":
        return mooncake_workload(count, rate, seed)
    if scenario.name == "sharegpt":
        return sharegpt_workload(count // 2, rate, seed)  # long multi-turn contexts: half the turns keep runs short
    if scenario.name == "azure-tool":
        return azure_tool_workload(count, rate, traces.data_dir, seed)
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


BOUND = "contention-free bound"
"""The row of each case's table that holds the bound, not a router's run."""

ISOLATION_GAP_S = 100_000.0
"""Simulated seconds between requests replayed alone: far longer than any request takes, so none overlap."""


def every_request(workload: Workload) -> list[TraceRequest]:
    """The workload's requests and conversation turns, by arrival."""
    return sorted([*workload.requests, *(turn for c in workload.conversations for turn in c.turns)],
                  key=lambda r: r.arrival_s)


def contention_free_bound(workload: Workload, config: ClusterConfig) -> dict[str, RequestRecord]:
    """Each request (and conversation turn) alone on one idle engine of ``config`` that holds every prefix
    served before it: a placement can only add queueing, batching and recomputation to this latency.

    Raises:
        RuntimeError: two requests overlapped (one ran longer than ``ISOLATION_GAP_S``).
    """
    requests = every_request(workload)
    # Room for every token of the run: nothing cached is ever evicted.
    capacity = sum(r.prompt_tokens + r.output_tokens for r in requests) + BLOCK_SIZE
    alone = Workload(requests=tuple(r.at(i * ISOLATION_GAP_S) for i, r in enumerate(requests)))
    records = build_simulator(alone, replace(config, engines=1, kv_capacity_tokens=capacity)).run().records
    if any(r.finish_s >= r.arrival_s + ISOLATION_GAP_S for r in records):
        raise RuntimeError(f"a request ran longer than {ISOLATION_GAP_S:g} s alone: the bound needs a longer gap")
    return {r.request_id: r for r in records}


def run_result(served: SimulationResult, bound: dict[str, RequestRecord], scenario: Scenario, engines: int,
               label: str, ideal: float) -> RunResult:
    metrics = served.metrics().overall
    excess_ttft = [r.ttft_s - bound[r.request_id].ttft_s for r in served.records]
    excess_after_ttft = [(r.jct_s - r.ttft_s) - (bound[r.request_id].jct_s - bound[r.request_id].ttft_s)
                     for r in served.records]
    return RunResult(scenario.name, scenario.rate_per_engine, engines, label, metrics.count, metrics.jct_s.mean,
                     metrics.jct_s.p99, metrics.ttft_s.mean, metrics.ttft_s.p99, metrics.prefix_hit_ratio, ideal,
                     float(np.mean(excess_ttft)), float(np.mean(excess_after_ttft)))


def bound_result(bound: dict[str, RequestRecord], served: SimulationResult, scenario: Scenario,
                 engines: int, ideal: float) -> RunResult:
    """The bound over the requests a run completed (a request no engine could hold has no latency)."""
    records = [bound[r.request_id] for r in served.records]
    jct = Distribution.of([r.jct_s for r in records])
    ttft = Distribution.of([r.ttft_s for r in records])
    return RunResult(scenario.name, scenario.rate_per_engine, engines, BOUND, len(records), jct.mean, jct.p99,
                     ttft.mean, ttft.p99, ideal, ideal, 0.0, 0.0)


@dataclass(frozen=True)
class RouterRun:
    """One router configuration of a case: ``label`` names it in the tables, ``router`` in the registry."""

    label: str
    router: str
    options: dict[str, object]


def router_options(router: str) -> dict[str, object]:
    """E2's prefill and decode time functions are the simulated engines' own cost profile (Preble profiles
    its GPU and model offline the same way) and its H fits the run length; the baselines take their
    sources' defaults."""
    if router != "e2":
        return {}
    return {"phase_times": get_profile(PROFILE)}


def router_runs(routers: Sequence[str], rebalance_thresholds: Sequence[float],
                history_window_s: float | None = None) -> list[RouterRun]:
    """Each router once with its bench options; with ``rebalance_thresholds``, E2 once per Th_bal
    (labelled ``e2 Th_bal=X``); E2's H is ``history_window_s`` (default ``E2_HISTORY_WINDOW_S``)."""
    e2_options = {**router_options("e2"), "history_window_s": history_window_s or E2_HISTORY_WINDOW_S}
    runs: list[RouterRun] = []
    for router in routers:
        if router == "e2" and rebalance_thresholds:
            runs.extend(RouterRun(threshold_label(t), router, {**e2_options, "rebalance_threshold": t})
                        for t in rebalance_thresholds)
        else:
            runs.append(RouterRun(router, router, e2_options if router == "e2" else router_options(router)))
    return runs


def threshold_label(threshold: float) -> str:
    return f"e2 Th_bal={threshold:g}"


def cluster_config(scenario: Scenario, engines: int, run: RouterRun, kv_capacity_tokens: int | None = None,
                   priority_groups: int = PRIORITY_GROUPS) -> ClusterConfig:
    """The real trace's engines hold the profile's stated KV capacity (111,616 tokens: its prompts average
    12k tokens, so 4,096 blocks would hold about five); the synthetic workloads' hold ``KV_BLOCKS``;
    ``kv_capacity_tokens`` overrides both. ``priority_groups``: Preble's P of the engines' local order."""
    engine = EngineConfig(num_blocks=KV_BLOCKS, block_size=BLOCK_SIZE, priority_groups=priority_groups)
    return ClusterConfig(engines=engines, profile=PROFILE, engine=engine,
                         use_profile_capacity=scenario.name == "mooncake-trace", kv_capacity_tokens=kv_capacity_tokens,
                         router=run.router, router_options=run.options, queue_policy="fcfs")


def run_one(workload: Workload, scenario: Scenario, engines: int, run: RouterRun,
            kv_capacity_tokens: int | None = None, priority_groups: int = PRIORITY_GROUPS) -> SimulationResult:
    return build_simulator(workload, cluster_config(scenario, engines, run, kv_capacity_tokens, priority_groups)).run()


def with_service_class(workload: Workload, service_class: ServiceClass) -> Workload:
    """Every request and conversation turn of ``workload`` in ``service_class``."""
    def retag(request: TraceRequest) -> TraceRequest:
        return replace(request, service_class=service_class)

    return replace(workload, requests=tuple(map(retag, workload.requests)),
                   conversations=tuple(replace(c, turns=tuple(map(retag, c.turns))) for c in workload.conversations))


def positive_tokens(text: str) -> int:
    """An argparse type: a whole number of tokens, at least one block."""
    tokens = positive_int(text)
    if tokens < BLOCK_SIZE:
        raise argparse.ArgumentTypeError(f"must be at least one block ({BLOCK_SIZE} tokens), got {tokens}")
    return tokens


def results_table(results: Sequence[RunResult], scenario: Scenario, engines: int) -> ResultTable:
    rows = [r for r in results if (r.workload, r.rate_per_engine, r.engines) == (scenario.name, scenario.rate_per_engine, engines)]
    baseline = next(r for r in rows if r.router == "round_robin")
    table = ResultTable(
        ["router", "done", "mean s", "p99 s", "mean TTFT s", "p99 TTFT s", "hit ratio", "ideal",
         "mean vs RR", "p99 vs RR", "over bound s: TTFT / after it"],
        title=f"{scenario.name}, {scenario.rate_per_engine:g}/s per engine, {engines} engines",
    )
    for r in rows:
        table.add(r.router, r.completed, r.mean_latency_s, r.p99_latency_s, r.mean_ttft_s, r.p99_ttft_s,
                  r.hit_ratio, r.ideal_hit_ratio, f"{baseline.mean_latency_s / r.mean_latency_s:.2f}x",
                  f"{baseline.p99_latency_s / r.p99_latency_s:.2f}x", f"{r.excess_ttft_s:.3g} / {r.excess_after_ttft_s:.3g}")
    return table


def summary_table(results: Sequence[RunResult]) -> ResultTable:
    """One row per workload, rate and cluster size: E2 against round-robin and the best anchor."""
    table = ResultTable(["workload", "rate/engine", "engines", "E2 mean vs RR", "E2 p99 vs RR", "best other (mean)",
                         "its mean / p99 vs RR", "2x mean / 3x p99 met", "E2 ahead of all (mean, p99)",
                         "bound mean / p99 vs RR", "hit RR -> E2 (ideal)"], title="Summary")
    for case in sorted({(r.workload, r.rate_per_engine, r.engines) for r in results}):
        rows = {r.router: r for r in results if (r.workload, r.rate_per_engine, r.engines) == case}
        if "e2" not in rows:
            continue
        rr, e2, bound = rows["round_robin"], rows["e2"], rows[BOUND]
        others = [r for name, r in rows.items() if name not in ("e2", "round_robin", BOUND)] or [rr]
        best = min(others, key=lambda r: r.mean_latency_s)
        mean, p99 = rr.mean_latency_s / e2.mean_latency_s, rr.p99_latency_s / e2.p99_latency_s
        ahead_mean = all(e2.mean_latency_s <= r.mean_latency_s for r in others)
        ahead_p99 = all(e2.p99_latency_s <= r.p99_latency_s for r in others)
        table.add(*case, f"{mean:.2f}x", f"{p99:.2f}x", best.router,
                  f"{rr.mean_latency_s / best.mean_latency_s:.2f}x / {rr.p99_latency_s / best.p99_latency_s:.2f}x",
                  f"{'yes' if mean >= 2 else 'no'} / {'yes' if p99 >= 3 else 'no'}",
                  f"{'yes' if ahead_mean else 'no'}, {'yes' if ahead_p99 else 'no'}",
                  f"{rr.mean_latency_s / bound.mean_latency_s:.2f}x / {rr.p99_latency_s / bound.p99_latency_s:.2f}x",
                  f"{rr.hit_ratio:.2f} -> {e2.hit_ratio:.2f} ({e2.ideal_hit_ratio:.2f})")
    return table


def sensitivity_table(results: Sequence[RunResult], thresholds: Sequence[float]) -> ResultTable:
    """One row per case and Th_bal: E2 against round-robin and against the best other router (by mean)."""
    table = ResultTable(["workload", "rate/engine", "engines", "Th_bal", "E2 mean s", "E2 p99 s", "mean vs RR",
                         "p99 vs RR", "best other (mean)", "E2 mean / p99 vs it", "2x mean / 3x p99 met",
                         "hit ratio"], title="Th_bal sensitivity")
    labels = {threshold_label(t): t for t in thresholds}
    for case in sorted({(r.workload, r.rate_per_engine, r.engines) for r in results}):
        rows = [r for r in results if (r.workload, r.rate_per_engine, r.engines) == case]
        rr = next(r for r in rows if r.router == "round_robin")
        others = [r for r in rows if r.router not in labels and r.router not in ("round_robin", BOUND)] or [rr]
        best = min(others, key=lambda r: r.mean_latency_s)
        for e2 in (r for r in rows if r.router in labels):
            mean, p99 = rr.mean_latency_s / e2.mean_latency_s, rr.p99_latency_s / e2.p99_latency_s
            table.add(*case, f"{labels[e2.router]:g}", e2.mean_latency_s, e2.p99_latency_s, f"{mean:.2f}x",
                      f"{p99:.2f}x", best.router,
                      f"{best.mean_latency_s / e2.mean_latency_s:.2f}x / {best.p99_latency_s / e2.p99_latency_s:.2f}x",
                      f"{'yes' if mean >= 2 else 'no'} / {'yes' if p99 >= 3 else 'no'}", round(e2.hit_ratio, 3))
    return table


def plot(results: Sequence[RunResult], routers: Sequence[str], out: Path) -> None:
    """Mean latency against the request rate, one panel per workload and cluster size, a line per router."""
    for workload, engines in sorted({(r.workload, r.engines) for r in results}):
        series = []
        for router in routers:
            points = sorted((r.rate_per_engine, r.mean_latency_s) for r in results
                            if (r.workload, r.engines, r.router) == (workload, engines, router))
            series.append(LineSeries(router, [x for x, _ in points], [y for _, y in points]))
        line_plot(out / f"latency_{workload}_{engines}.png", series,
                  f"{workload}, {engines} engines: mean latency", "requests/s per engine", "mean latency (s)",
                  log_y=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="forethought bench e2", description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=positive_int, default=1000, help="requests (or conversation turns) per run")
    parser.add_argument("--engines", type=listed(positive_int), default=[4, 8], help="cluster sizes, comma-separated")
    parser.add_argument("--routers", type=names_of(ROUTER_NAMES), default=list(ROUTERS),
                        help=f"comma-separated, of {', '.join(ROUTER_NAMES)} (round_robin always runs: the baseline)")
    parser.add_argument("--workloads", type=names_of(tuple(RATES_PER_ENGINE)), default=None,
                        help="comma-separated (default: mooncake-trace when the trace is there, else mooncake, and "
                             "sharegpt, toolprompt, azure-tool)")
    parser.add_argument("--rates", type=listed(positive_number), default=None,
                        help="requests/s per engine for every workload, comma-separated (default: per workload)")
    parser.add_argument("--mooncake", type=input_file, default=None,
                        help=f"the Mooncake trace for mooncake-trace (default: <data dir>/{CONVERSATION_TRACE})")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="trace directory holding the Azure trace for azure-tool (default ../shared/data)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--e2-rebalance-thresholds", type=listed(positive_number), default=[],
                        help="Th_bal values, comma-separated: E2 runs once per value, the other routers once")
    parser.add_argument("--e2-history-window", type=positive_number, default=None,
                        help=f"E2's H in seconds (default {E2_HISTORY_WINDOW_S:g})")
    parser.add_argument("--kv-capacity-tokens", type=positive_tokens, default=None,
                        help="KV tokens each engine holds, for every workload (default: the profile's for "
                             f"mooncake-trace, {KV_BLOCKS * BLOCK_SIZE} for the others)")
    parser.add_argument("--service-class", choices=("rt", "be"), default="rt",
                        help="every request's class: rt (no objectives, so each engine serves its waiting requests in "
                             "arrival order) or be (the mesh's class for a request naming none: each engine orders "
                             "its waiting requests by Preble's priority groups)")
    parser.add_argument("--priority-groups", type=non_negative_int, default=PRIORITY_GROUPS,
                        help=f"Preble's P, the engines' priority groups of best-effort requests (0: arrival order; "
                             f"default {PRIORITY_GROUPS})")
    parser.add_argument("--quick", action="store_true", help="100 requests, 4 engines: a smoke run")
    add_output_argument(parser, "e2")
    args = parser.parse_args(argv)
    sizes = [4] if args.quick else args.engines
    count = 100 if args.quick else args.requests
    routers = list(args.routers)
    if "round_robin" not in routers:
        routers.append("round_robin")  # the baseline every ratio divides by
    thresholds = args.e2_rebalance_thresholds
    runs = router_runs(routers, thresholds, args.e2_history_window)
    traces = Traces(conversation_trace(args.mooncake, args.data_dir), args.data_dir)
    workloads = args.workloads or default_workloads(traces)
    if "mooncake-trace" in workloads and traces.mooncake is None:
        parser.error(f"argument --workloads: mooncake-trace needs the Mooncake trace: --mooncake PATH or "
                     f"<data dir>/{CONVERSATION_TRACE}")
    if "azure-tool" in workloads:  # its trace is read last, after the other workloads' runs: check its length now
        try:
            azure_arrivals("code", count, 1.0, args.data_dir)
        except ValueError as error:
            parser.error(f"argument --requests: {error}")
    scenarios = selected_scenarios(workloads, args.rates)
    cases = [(s, e) for s in scenarios for e in sizes]
    results: list[RunResult] = []
    bounds: dict[tuple[tuple[str, int, int], ...], dict[str, RequestRecord]] = {}  # by the requests' contents
    for scenario, engines in cases:
        workload = with_service_class(build_workload(scenario, engines, count, traces, args.seed), ServiceClass[args.service_class.upper()])
        ideal = ideal_hit_ratio(workload)
        # The rates re-time the same requests: their bound is computed once.
        contents = tuple((r.request_id, r.prompt_tokens, r.output_tokens) for r in every_request(workload))
        if contents not in bounds:
            print(f"{scenario.name}: the contention-free bound of {len(contents)} requests", file=sys.stderr, flush=True)
            bounds[contents] = contention_free_bound(workload, cluster_config(scenario, engines, runs[0], args.kv_capacity_tokens))
        for run in runs:
            served = run_one(workload, scenario, engines, run, args.kv_capacity_tokens, args.priority_groups)
            results.append(result := run_result(served, bounds[contents], scenario, engines, run.label, ideal))
            print(f"[{sum(r.router != BOUND for r in results)}/{len(cases) * len(runs)}] {scenario.name} "
                  f"{scenario.rate_per_engine:g}/s per engine, {engines} engines, {run.label}: "
                  f"mean {result.mean_latency_s:.3g} s, p99 {result.p99_latency_s:.3g} s", file=sys.stderr, flush=True)
        results.append(bound_result(bounds[contents], served, scenario, engines, ideal))  # refusals: any router's
    first = sensitivity_table(results, thresholds) if thresholds else summary_table(results)
    tables = [first] + [results_table(results, s, e) for s, e in cases]
    args.out.mkdir(parents=True, exist_ok=True)
    command = " ".join(["forethought bench e2", *(argv if argv is not None else sys.argv[1:])])
    preamble = (f"E2 vs baselines in the cluster simulator ({PROFILE} cost profile, also E2's time functions; "
                f"E2's H {args.e2_history_window or E2_HISTORY_WINDOW_S:g} s; "
                f"{kv_blocks_stated(args.kv_capacity_tokens)}; requests {args.service_class.upper()} without objectives, "
                f"P = {args.priority_groups} priority groups for BE; FCFS "
                f"global queue, {count} requests per run (ShareGPT: {count // 2} turns; mooncake-trace: the first "
                f"{count} of {traces.mooncake.name if traces.mooncake else 'the trace'}), seed {args.seed}). "
                f"Command: `{command.strip()}`. Ratios: round-robin's latency / the router's; the aim is 2x mean "
                "and 3x p99 over round-robin and E2 ahead of every other router. The contention-free bound: each "
                "request alone on an idle engine caching every prefix served before it; round-robin's latency over "
                "it is the most any router can gain; \"over bound\": the mean of a request's TTFT, and of its time "
                "after the first token, beyond its bound's (queueing and recomputation; decoding in a batch).")
    write_table(args.out / "table.md", tables, preamble)
    plot(results, [run.label for run in runs], args.out)
    return 0


def kv_blocks_stated(kv_capacity_tokens: int | None) -> str:
    """The engines' KV capacity, as the table's preamble states it."""
    if kv_capacity_tokens is not None:
        return f"{kv_capacity_tokens // BLOCK_SIZE} KV blocks of {BLOCK_SIZE} tokens per engine (--kv-capacity-tokens)"
    return (f"{KV_BLOCKS} KV blocks of {BLOCK_SIZE} tokens per engine, "
            f"mooncake-trace: the profile's {get_profile(PROFILE).kv_capacity_tokens // BLOCK_SIZE}")


def default_workloads(traces: Traces) -> list[str]:
    """Every workload, the real Mooncake trace in place of the synthetic one when it is there."""
    fallback = "mooncake" if traces.mooncake is not None else "mooncake-trace"
    return [name for name in RATES_PER_ENGINE if name != fallback]


def selected_scenarios(workloads: Sequence[str], rates: Sequence[float] | None) -> list[Scenario]:
    """The chosen workloads (names of ``RATES_PER_ENGINE``) at their default rates, or at ``rates`` for all."""
    return [Scenario(name, rate) for name in RATES_PER_ENGINE if name in workloads
            for rate in (rates or RATES_PER_ENGINE[name])]


if __name__ == "__main__":
    raise SystemExit(main())
