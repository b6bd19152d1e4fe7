"""``forethought bench bros``: BROS vs FCFS vs round-robin on a hybrid RT/BE workload (BROS section 7.2,
ablation of section 7.4.1).

One engine core (the serving code) per run, in the discrete-event simulator, on a GPU cost profile. RT
requests take ShareGPT first-turn lengths (vLLM's filter: prompt <= 1024, prompt + output <= 2048, both
>= 4 tokens) and arrive by Poisson at each rate; BE batches of uniform 512-1024 / 32-128 token requests
are resubmitted whenever the previous batch completes, for the whole window. SLOs: TTFT 0.4 s, TPOT 0.2 s.
Systems: ``bros`` (priority packing, bidirectional KV), ``bros-no-bikv`` (the ablation), ``fcfs`` (vLLM's
arrival order, blind to class) and ``round-robin`` (BROS-RR: RT and BE served alternately, no bidirectional KV).
RT metrics cover every RT request of the window (the run drains them); BE throughput counts BE requests
completed inside the window.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from forethought.arguments import listed, positive_int, positive_number
from forethought.costmodel import PROFILES
from forethought.domain import ServiceClass
from forethought.engine.core import EngineConfig
from forethought.sim.config import ClusterConfig, build_simulator
from forethought.sim.metrics import ClassMetrics, summarize
from forethought.workloads.arrivals import poisson_arrivals, with_arrivals
from forethought.workloads.azure import azure_trace_path, load_azure_trace
from forethought.workloads.sharegpt import first_turns, load_sharegpt_conversations
from forethought.workloads.workload import (
    ClosedLoopBatches,
    RequestClass,
    TraceRequest,
    Workload,
)

from benchmarks.report import (
    LineSeries,
    ResultTable,
    add_output_argument,
    line_plot,
    progress,
    write_table,
)

TTFT_SLO_S = 0.4
TPOT_SLO_S = 0.2
RT_CLASS = RequestClass(ttft_slo_s=TTFT_SLO_S, tpot_slo_s=TPOT_SLO_S)


@dataclass(frozen=True)
class System:
    """A compared configuration: the engine's scheduling policy and KV layout."""

    name: str
    policy: str
    bidirectional_kv: bool


SYSTEMS = (
    System("bros", "bros", True),
    System("bros-no-bikv", "bros", False),
    System("fcfs", "fcfs", False),
    System("round-robin", "round_robin", False),
)


@dataclass(frozen=True)
class RunResult:
    system: str
    rate: float
    rt: ClassMetrics
    be: ClassMetrics
    rt_unfinished: int


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="forethought bench bros", description=__doc__.split("\n")[0])
    parser.add_argument("--rates", type=listed(positive_number), default=None,
                        help="RT request rates, req/s, comma-separated (default 1,2,3; --quick 2)")
    parser.add_argument("--duration", type=positive_number, default=None, help="window in simulated seconds "
                        "(default 600, the paper's 10 minutes; --quick 30)")
    # The paper gives no batch size; 256 (~218k tokens, four times the 56k-token KV cache of
    # llama-13b-a100) makes vLLM's RT TTFT attainment 1-6%, as the paper's 1.28% average.
    parser.add_argument("--be-batch", type=positive_int, default=256, help="BE requests per closed-loop batch")
    parser.add_argument("--profile", default="llama-13b-a100", choices=sorted(PROFILES), help="cost profile of the engine")
    parser.add_argument("--rt-source", choices=("sharegpt", "azure-conv"), default="sharegpt",
                        help="where RT prompt/output lengths come from")
    parser.add_argument("--data-dir", type=Path, default=None, help="trace directory (default ../shared/data)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="one rate, a 30 s window")
    add_output_argument(parser, "bros")
    args = parser.parse_args(list(argv))
    args.rates = args.rates or ([2.0] if args.quick else [1.0, 2.0, 3.0])
    args.duration = args.duration or (30.0 if args.quick else 600.0)
    return args


def rt_length_pool(source: str, data_dir: Path | None) -> list[TraceRequest]:
    """RT requests whose lengths the runs sample, with the SLOs attached."""
    if source == "sharegpt":
        pool = first_turns(load_sharegpt_conversations(limit=4000, request_class=RT_CLASS))
    else:
        pool = load_azure_trace(azure_trace_path("conv", data_dir), limit=4000, request_class=RT_CLASS)
    return [r for r in pool if 4 <= r.prompt_tokens <= 1024 and r.output_tokens >= 4
            and r.prompt_tokens + r.output_tokens <= 2048]


def make_workload(pool: Sequence[TraceRequest], rate: float, duration_s: float, be_batch: int,
                  seed: int) -> Workload:
    """Poisson RT arrivals over the window plus an endless-until-the-window-ends BE closed loop."""
    rng = np.random.default_rng(seed)
    arrivals = [t for t in poisson_arrivals(rate, int(rate * duration_s * 2) + 10, rng) if t < duration_s]
    picks = rng.integers(0, len(pool), len(arrivals))
    rt = [pool[int(i)] for i in picks]
    rt = [r.__class__(f"rt-{n}", 0.0, r.prompt, r.output_tokens, ServiceClass.RT, r.ttft_slo_s, r.tpot_slo_s)
          for n, r in enumerate(rt)]
    be = ClosedLoopBatches("be", batch_size=be_batch, stop_s=duration_s, seed=seed)
    return Workload(requests=tuple(with_arrivals(rt, arrivals)), batches=(be,))


def run_one(system: System, workload: Workload, profile: str, duration_s: float, rate: float) -> RunResult:
    engine = EngineConfig(num_blocks=1, policy=system.policy, bidirectional_kv=system.bidirectional_kv)
    config = ClusterConfig(engines=1, profile=profile, engine=engine, max_waiting_per_engine=None)
    result = build_simulator(workload, config).run()
    rt = [r for r in result.records if r.service_class is ServiceClass.RT]
    be = [r for r in result.records if r.service_class is ServiceClass.BE and r.finish_s <= duration_s]
    return RunResult(system.name, rate, summarize(rt, duration_s), summarize(be, duration_s),
                     rt_unfinished=len(workload.requests) - len(rt))


def change(new: float, old: float) -> float:
    """Relative change of ``new`` against ``old``, in percent."""
    return 100.0 * (new - old) / old if old else float("nan")


def results_table(results: Sequence[RunResult]) -> ResultTable:
    table = ResultTable(["system", "RT rate (req/s)", "RT norm. latency (s/token)", "RT TTFT p50 (s)",
                         "RT TTFT SLO", "RT TPOT SLO", "RT both SLOs", "BE throughput (req/s)",
                         "RT done"], title="Per run")
    for run in results:
        table.add(run.system, run.rate, run.rt.normalized_latency_s.mean, run.rt.ttft_s.p50,
                  run.rt.ttft_attainment, run.rt.tpot_attainment, run.rt.slo_attainment,
                  run.be.requests_per_s, f"{run.rt.count}/{run.rt.count + run.rt_unfinished}")
    return table


def ratio_table(results: Sequence[RunResult], rates: Sequence[float]) -> ResultTable:
    """BROS against each other system at each rate, and the mean over rates (as the paper reports)."""
    table = ResultTable(["BROS vs", "RT rate (req/s)", "RT norm. latency change (%)",
                         "BE throughput change (%)", "TTFT SLO (BROS / other)", "TPOT SLO (BROS / other)"],
                        title="BROS side by side")
    by_key = {(r.system, r.rate): r for r in results}
    for other in (s.name for s in SYSTEMS if s.name != "bros"):
        latency, throughput = [], []
        for rate in rates:
            bros, base = by_key[("bros", rate)], by_key[(other, rate)]
            latency.append(change(bros.rt.normalized_latency_s.mean, base.rt.normalized_latency_s.mean))
            throughput.append(change(bros.be.requests_per_s, base.be.requests_per_s))
            table.add(other, rate, latency[-1], throughput[-1],
                      _ratio(bros.rt.ttft_attainment, base.rt.ttft_attainment),
                      _ratio(bros.rt.tpot_attainment, base.rt.tpot_attainment))
        table.add(other, "mean", float(np.mean(latency)), float(np.mean(throughput)), None, None)
    return table


def _ratio(new: float, old: float) -> str:
    return f"{new:.3f} / {old:.3f}"


def plot_results(out: Path, results: Sequence[RunResult], rates: Sequence[float]) -> None:
    panels = (
        ("normalized_latency.png", "RT normalized latency", "seconds per output token",
         lambda r: r.rt.normalized_latency_s.mean, True),
        ("be_throughput.png", "BE throughput", "requests per second", lambda r: r.be.requests_per_s, False),
        ("ttft_attainment.png", "RT TTFT SLO attainment (0.4 s)", "fraction", lambda r: r.rt.ttft_attainment,
         False),
        ("tpot_attainment.png", "RT TPOT SLO attainment (0.2 s)", "fraction", lambda r: r.rt.tpot_attainment,
         False),
    )
    for filename, title, ylabel, value, log_y in panels:
        series = [LineSeries(system.name, list(rates),
                             [value(r) for rate in rates for r in results if r.system == system.name
                              and r.rate == rate]) for system in SYSTEMS]
        line_plot(out / filename, series, title, "RT request rate (req/s)", ylabel, log_y=log_y)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    pool = rt_length_pool(args.rt_source, args.data_dir)
    runs = [(system, rate) for rate in args.rates for system in SYSTEMS]
    results = []
    for system, rate in progress(runs, "bros runs"):
        workload = make_workload(pool, rate, args.duration, args.be_batch, args.seed)
        results.append(run_one(system, workload, args.profile, args.duration, rate))
    command = "forethought bench bros " + " ".join(argv)
    preamble = (f"Command: `{command.strip()}`\n\nRT lengths: {args.rt_source} ({len(pool)} requests after "
                f"filtering); BE batches of {args.be_batch}; window {args.duration:g} s; profile "
                f"{args.profile}; seed {args.seed}; wall time {time.perf_counter() - started:.0f} s.")
    write_table(args.out / "table.md", [ratio_table(results, args.rates), results_table(results)], preamble)
    plot_results(args.out, results, args.rates)
    return 0
