"""Hermes's application scheduling in the application simulator (Hermes section 5): Gittins against
request-level FCFS (vLLM), application-level FCFS (Parrot), VTC fair share, ATLAS (Autellix) and SRPT on
the mean, beside an oracle that knows each run's true demand; the deadline variant (LSTF against EDF);
the prewarm knob K swept; ablations without refinement and without Gittins.

Runs are drawn from the example application files (``examples/applications``) in the paper's mix, 72%
small, 26% medium, 2% large (section 5.1; a file's size class is the one docs/demand.md gives it), each
with the steps and lengths its file describes (``forethought.demand.draw_runs``). Arrivals are the Azure
LLM trace's, scaled so the runs' LLM demand is a chosen share of the cluster's capacity (the load).
Engines follow a cost profile with a fixed number of batch slots (``forethought.appsim``).

    forethought bench hermes [--runs 400] [--loads 0.7,0.85,1.0] [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from forethought.appsim import (
    AppRun,
    ClusterSpec,
    EngineModel,
    EstimateCache,
    PrewarmTally,
    SimResult,
    build_order,
    simulate,
    with_deadlines,
)
from forethought.arguments import listed, positive_int, positive_number, share
from forethought.costmodel import PROFILES, get_profile
from forethought.demand import BackendKind, BackendSpec, PDGraph, draw_runs, load_application
from forethought.documents import read_document
from forethought.workloads.azure import azure_arrivals

from benchmarks.report import LineSeries, ResultTable, add_output_argument, line_plot, progress, write_table

APPLICATIONS = Path(__file__).resolve().parents[1] / "examples" / "applications"
SIZE_CLASSES = {  # docs/demand.md, "The examples"
    "small": ("equation_verification", "kbqa_verification", "react_fact_verification"),
    "medium": ("code_generation", "plan_and_execute"),
    "large": ("document_merging", "mapreduce_summarization"),
}
MIX = {"small": 0.72, "medium": 0.26, "large": 0.02}  # Hermes section 5.1
TOOL_WARMUP_S = {  # assumed: a container start; prewarm.md measures 0.4-0.5 s for a sandbox; DNN model loads
    "container": 1.0, "python-sandbox": 0.5, "vit-gpt2-captioning": 3.0, "detr-object-detection": 3.0,
    "speecht5-tts": 3.0, "stable-diffusion": 8.0, "text-to-video": 8.0,
}  # remote APIs (web search, Wikipedia) and the in-process splitter have nothing to warm
LORA_WARMUP_S = 0.05  # the demand service's --warmup-lora-s
SLACK_FACTORS = (1.2, 1.5, 2.0)  # Hermes section 5.2


@dataclass(frozen=True)
class Contender:
    """A row of the comparison: an order, the estimates it reads, and the prewarm knob."""

    label: str
    order: str
    refine: bool = True
    prewarm_knob: float | None = None


CONTENDERS = (
    Contender("vLLM (request FCFS)", "fcfs"),
    Contender("Parrot (application FCFS)", "parrot"),
    Contender("VTC", "vtc"),
    Contender("ATLAS (Autellix)", "atlas"),
    Contender("SRPT on the mean (w/o Gittins)", "srpt-mean"),
    Contender("Gittins w/o refinement", "gittins", refine=False),
    Contender("Gittins (Hermes)", "gittins"),
    Contender("Hermes + prewarm K=0.5", "gittins", prewarm_knob=0.5),
    Contender("oracle (SRPT on the truth)", "oracle"),
)


def warmup_s(backend: BackendSpec) -> float:
    if backend.kind is BackendKind.TOOL:
        return TOOL_WARMUP_S.get(backend.tool, 0.0)
    return LORA_WARMUP_S if backend.lora_adapter else 0.0


def load_graphs() -> tuple[dict[str, PDGraph], dict[str, object]]:
    """Every application in the mix: its graph (profiled from its file) and the file's content."""
    names = [name for members in SIZE_CLASSES.values() for name in members]
    documents = {name: read_document(APPLICATIONS / f"{name}.yaml") for name in names}
    return {name: load_application(APPLICATIONS / f"{name}.yaml") for name in names}, documents


def draw_mix(documents: dict[str, object], count: int, seed: int) -> list[AppRun]:
    """``count`` runs at time 0: a size class by the mix, an application of it uniformly, one drawn run."""
    rng = random.Random(seed)
    classes = rng.choices(list(MIX), weights=list(MIX.values()), k=count)
    chosen = [rng.choice(SIZE_CLASSES[size]) for size in classes]
    pools = {name: draw_runs(documents[name], chosen.count(name), rng) for name in sorted(set(chosen))}
    runs = []
    for index, name in enumerate(chosen):
        steps = pools[name].pop()
        runs.append(AppRun(f"run-{index}", name, 0.0, tuple(steps), client=name))
    return runs


def at_load(runs: Sequence[AppRun], base_arrivals: np.ndarray, load: float, cluster: ClusterSpec,
            graphs: dict[str, PDGraph]) -> list[AppRun]:
    """The runs placed at the trace's arrivals, scaled so their LLM demand is ``load`` of capacity."""
    demand = sum(cluster.engine.unit_seconds(graphs[r.application].units[s.unit].backend, s.consumption)
                 for r in runs for s in r.steps if graphs[r.application].units[s.unit].backend.kind is BackendKind.LLM)
    rate = load * cluster.engine.capacity * cluster.engines * len(runs) / demand  # runs per second
    arrivals = base_arrivals[: len(runs)] / rate  # the base arrivals come at one run per second
    return [AppRun(r.run_id, r.application, float(t), r.steps, r.client) for r, t in zip(runs, arrivals)]


class Replays:
    """Runs replays, sharing the estimate caches (with and without refinement) across them."""

    def __init__(self, graphs: dict[str, PDGraph], cluster: ClusterSpec, walks: int, seed: int) -> None:
        self.graphs, self.cluster = graphs, cluster
        self.caches = {refine: EstimateCache(graphs, cluster.engine.unit_seconds, refine, walks, seed)
                       for refine in (True, False)}

    def replay(self, runs: Sequence[AppRun], order: str, refine: bool = True, knob: float | None = None) -> SimResult:
        cache = self.caches[refine]
        cluster = ClusterSpec(self.cluster.engine, self.cluster.engines, self.cluster.warmup_s, knob)
        return simulate(runs, self.graphs, build_order(order, cache), cluster, cache)


def reduction(result: float, baseline: float) -> str:
    return f"{1 - result / baseline:.1%}"


def comparison(replays: Replays, runs_at: dict[float, list[AppRun]], loads: Sequence[float],
               main_load: float) -> tuple[list[ResultTable], dict[str, object], dict[float, dict[str, SimResult]]]:
    tables, results = [], {}
    jobs = [(load, c) for load in loads for c in CONTENDERS]
    for load, contender in progress(jobs, "scheduling", total=len(jobs)):
        results.setdefault(load, {})[contender.label] = replays.replay(
            runs_at[load], contender.order, contender.refine, contender.prewarm_knob)
    summary: dict[str, object] = {}
    for load in loads:
        by_label = results[load]
        fcfs, oracle = by_label[CONTENDERS[0].label], by_label["oracle (SRPT on the truth)"]
        table = ResultTable(["scheduler", "finished", "mean ACT (s)", "P95 ACT (s)", "P99 ACT (s)", "mean vs vLLM",
                             "P95 vs vLLM", "mean / oracle"], title=f"ACT at load {load}")
        for contender in CONTENDERS:
            r = by_label[contender.label]
            table.add(contender.label, r.finished, r.mean_act_s, r.act_percentile_s(95), r.act_percentile_s(99),
                      reduction(r.mean_act_s, fcfs.mean_act_s), reduction(r.act_percentile_s(95), fcfs.act_percentile_s(95)),
                      r.mean_act_s / oracle.mean_act_s)
            summary[f"{load}/{contender.label}"] = {"mean_act_s": r.mean_act_s, "p95_act_s": r.act_percentile_s(95),
                                                     "p99_act_s": r.act_percentile_s(99), "finished": r.finished}
        tables.append(table)
    tables.insert(0, aims_table(results[main_load], main_load))
    return tables, summary, results


def aims_table(by_label: dict[str, SimResult], load: float) -> ResultTable:
    """Issue 15's aims for Gittins (Hermes), without and with prewarming, at the main load."""
    fcfs, oracle = by_label["vLLM (request FCFS)"], by_label["oracle (SRPT on the truth)"]
    table = ResultTable(["scheduler", "mean ACT vs vLLM (aim >= 70%)", "P95 vs vLLM (aim >= 80%)",
                         "mean / oracle (aim <= 1.1)", "mean vs Parrot", "mean vs VTC", "mean vs ATLAS"],
                        title=f"Aims at load {load}")
    for label in ("Gittins (Hermes)", "Hermes + prewarm K=0.5"):
        r = by_label[label]
        table.add(label, reduction(r.mean_act_s, fcfs.mean_act_s), reduction(r.act_percentile_s(95), fcfs.act_percentile_s(95)),
                  r.mean_act_s / oracle.mean_act_s,
                  *(reduction(r.mean_act_s, by_label[other].mean_act_s)
                    for other in ("Parrot (application FCFS)", "VTC", "ATLAS (Autellix)")))
    return table


def isolated_act_s(replays: Replays, runs: Sequence[AppRun]) -> list[float]:
    """Each run's completion time alone on the cluster (no queue, cold backends)."""
    acts = []
    for run in progress(runs, "isolated runs", total=len(runs)):
        alone = AppRun(run.run_id, run.application, 0.0, run.steps, run.client)
        acts.append(replays.replay([alone], "fcfs").outcomes[0].act_s)
    return acts


def deadlines(replays: Replays, runs: Sequence[AppRun], load: float, seed: int) -> tuple[ResultTable, dict[str, object]]:
    """Deadline = arrival + a factor drawn from 1.2, 1.5, 2 x the run's isolated completion time."""
    rng = random.Random(seed)
    factors = [rng.choice(SLACK_FACTORS) for _ in runs]
    alone = isolated_act_s(replays, runs)
    timed = with_deadlines(runs, [r.arrival_s + f * a for r, f, a in zip(runs, factors, alone)])
    by_factor = {f: {r.run_id for r, g in zip(runs, factors) if g == f} for f in SLACK_FACTORS}
    table = ResultTable(["scheduler", "all", *(f"{f}x" for f in SLACK_FACTORS), "mean ACT (s)"],
                        title=f"Deadline attainment at load {load}")
    summary: dict[str, object] = {}
    orders = [("EDF", "edf"), ("LSTF (Hermes-DDL)", "lstf"), ("vLLM (request FCFS)", "fcfs"), ("Gittins (Hermes)", "gittins")]
    for label, order in progress(orders, "deadlines", total=len(orders)):
        r = replays.replay(timed, order)
        cells = [r.deadline_attainment(), *(r.deadline_attainment(by_factor[f]) for f in SLACK_FACTORS)]
        table.add(label, *(f"{c:.1%}" for c in cells), r.mean_act_s)
        summary[label] = cells
    return table, summary


def prewarm_sweep(replays: Replays, runs: Sequence[AppRun], knobs: Sequence[float | None]
                  ) -> tuple[ResultTable, dict[str, object], list[tuple[float, float, float]]]:
    """Each run alone on the cluster with each knob (as Hermes Fig. 14 measures it, without queueing that
    would drown a warm-up of seconds): the latency cut against the warm-ups' waste."""
    table = ResultTable(["K", "mean ACT alone (s)", "latency cut vs off", "prewarms", "used", "benefit (s)",
                         "waste (s)", "cold waits (s)"], title="Prewarm knob, each run alone")
    alone = [AppRun(r.run_id, r.application, 0.0, r.steps, r.client) for r in runs]
    summary: dict[str, object] = {}
    points, off_mean = [], 0.0
    for knob in progress(knobs, "prewarm knob", total=len(knobs)):
        results = [replays.replay([run], "fcfs", True, knob) for run in alone]
        mean = float(np.mean([r.outcomes[0].act_s for r in results]))
        off_mean = mean if knob is None else off_mean
        tally = PrewarmTally(*(sum(getattr(r.prewarm, name) for r in results) for name in PrewarmTally.__dataclass_fields__))
        cut = 1 - mean / off_mean if off_mean else 0.0
        table.add("off" if knob is None else knob, mean, f"{cut:.1%}", tally.started, tally.used, tally.benefit_s,
                  tally.waste_s, tally.cold_wait_s)
        summary["off" if knob is None else str(knob)] = {"mean_act_alone_s": mean, "benefit_s": tally.benefit_s,
                                                          "waste_s": tally.waste_s, "started": tally.started,
                                                          "used": tally.used}
        if knob is not None:
            points.append((knob, tally.benefit_s, tally.waste_s))
    return table, summary, points


def prewarm_knob(text: str) -> float | None:
    """An argparse type: a prewarm knob K in (0, 1], or ``off`` (None: no prewarming)."""
    if text == "off":
        return None
    knob = share(text)
    if knob == 0:
        raise argparse.ArgumentTypeError("must be off or in (0, 1], not 0")
    return knob


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="forethought bench hermes", description="Hermes application scheduling")
    parser.add_argument("--runs", type=positive_int, default=400, help="application runs per replay")
    parser.add_argument("--loads", type=listed(positive_number), default=[0.7, 0.85, 1.0],
                        help="LLM demand as a share of the cluster's capacity, comma-separated")
    parser.add_argument("--main-load", type=positive_number, default=0.85, help="load of the aims, deadlines and prewarm sweep")
    parser.add_argument("--deadline-load", type=positive_number, default=0.5, help="load of the deadline variant")
    parser.add_argument("--knobs", type=listed(prewarm_knob), default=[None, 0.1, 0.3, 0.5, 0.7, 0.9],
                        help="prewarm knobs K swept, comma-separated, each in (0, 1] or off (default off,0.1,0.3,0.5,0.7,0.9)")
    parser.add_argument("--profile", default="llama-7b-a100", choices=sorted(PROFILES),
                        help="cost profile of the engines (docs/costmodel.md)")
    parser.add_argument("--engines", type=positive_int, default=1)
    parser.add_argument("--slots", type=positive_int, default=8, help="batch slots per engine")
    parser.add_argument("--trace", default="code", choices=("code", "conv"), help="Azure trace of the arrivals")
    parser.add_argument("--walks", type=positive_int, default=1000, help="random walks per demand estimate")
    parser.add_argument("--data-dir", type=Path, default=None, help="shared data dir (default ../shared/data)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a CI-sized run: 80 runs, one load, three knobs, 200 walks")
    add_output_argument(parser, "hermes")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.loads, args.knobs, args.walks = 80, [args.main_load], [None, 0.5, 0.9], 200
    try:
        azure_arrivals(args.trace, args.runs, 1.0, args.data_dir)  # the trace must hold a request per run
    except ValueError as error:
        parser.error(f"argument --runs: {error}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    loads, knobs = args.loads, args.knobs
    placed = sorted({*loads, args.main_load, args.deadline_load})
    graphs, documents = load_graphs()
    cluster = ClusterSpec(EngineModel(get_profile(args.profile), args.slots), args.engines, warmup_s)
    runs = draw_mix(documents, args.runs, args.seed)
    base = azure_arrivals(args.trace, args.runs, 1.0, args.data_dir)
    runs_at = {load: at_load(runs, base, load, cluster, graphs) for load in placed}
    replays = Replays(graphs, cluster, args.walks, args.seed)
    tables, summary, results = comparison(replays, runs_at, sorted({*loads, args.main_load}), args.main_load)
    deadline_table, deadline_summary = deadlines(replays, runs_at[args.deadline_load], args.deadline_load, args.seed)
    knob_table, knob_summary, points = prewarm_sweep(replays, runs, knobs)
    out = Path(args.out)
    plots(out, results, sorted(results), points)
    sizes = {size: sum(1 for r in runs if r.application in names) for size, names in SIZE_CLASSES.items()}
    command = "forethought bench hermes " + shlex.join(argv if argv is not None else [])
    preamble = (
        f"`{command.strip()}`\n\n"
        f"{args.runs} runs ({sizes['small']} small, {sizes['medium']} medium, {sizes['large']} large) of the seven "
        f"example applications, Azure `{args.trace}` arrivals scaled to each load (the runs' LLM demand as a share of "
        f"capacity), {args.engines} engine(s) of `{args.profile}` with {args.slots} batch slots, {args.walks} walks "
        f"per estimate ({replays.caches[True].size} estimates cached with refinement, {replays.caches[False].size} "
        f"without), seed {args.seed}; {time.perf_counter() - started:.0f} s wall."
    )
    write_table(out / "table.md", [*tables, deadline_table, knob_table], preamble)
    (out / "results.json").write_text(json.dumps(
        {"command": command.strip(), "act": summary, "deadlines": deadline_summary, "prewarm": knob_summary}, indent=1))
    return 0


def plots(out: Path, results: dict[float, dict[str, SimResult]], loads: Sequence[float],
          points: Sequence[tuple[float, float, float]]) -> None:
    ordered = sorted(loads)
    for name, measure in (("mean", lambda r: r.mean_act_s), ("p95", lambda r: r.act_percentile_s(95))):
        series = [LineSeries(c.label, ordered, [measure(results[load][c.label]) for load in ordered]) for c in CONTENDERS]
        line_plot(out / f"act_{name}.png", series, f"{name} ACT by load", "load (share of capacity)", f"{name} ACT (s)", log_y=True)
    if points:
        knobs = [p[0] for p in points]
        line_plot(out / "prewarm_knob.png", [LineSeries("benefit (s)", knobs, [p[1] for p in points]),
                                             LineSeries("waste (s)", knobs, [p[2] for p in points])],
                  "Prewarm: warm-up taken off the critical path vs idle warm time", "K", "seconds")


if __name__ == "__main__":
    raise SystemExit(main())
