"""Benchmark ``rank-refresh``: what re-ranking concurrent application runs costs (Hermes section 3.3).

Hermes re-ranks every running application once per bucket period: its Gittins rank (Eq. 1) at the
attained service it has now, from the demand estimate of the step it is in (re-estimated by Monte Carlo
only when the run moves to another step). The paper puts a refresh at under 3 ms for 100 concurrent
applications. Here N runs of the example applications (``examples/applications``) stand at random steps;
measured side by side in one run, per refresh of all N:

- re-rank: Eq. 1 for each run from its cached estimate (what the demand service does for a run whose
  step has not changed, and what every bucket period costs);
- re-estimate: a fresh Monte Carlo estimate for each run (what a step change costs, per run).

``forethought bench rank-refresh [--runs 10 100 300] [--walks 1000] [--refreshes 20]``
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from forethought.arguments import positive_int
from forethought.costmodel import PROFILES
from forethought.demand import DemandEstimate, DemandEstimator, PDGraph, RunPosition, gittins_rank, load_application
from forethought.services.demand.seconds import CostModelSeconds

from benchmarks.report import LineSeries, ResultTable, add_output_argument, line_plot, progress, write_table

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "applications"
PAPER_REFRESH_MS = 3.0


def positions(graphs: list[PDGraph], count: int, rng: random.Random) -> list[tuple[PDGraph, RunPosition]]:
    """``count`` runs, each of a random example at a random step it records, with a real upstream."""
    runs = []
    for _ in range(count):
        graph = rng.choice(graphs)
        unit = rng.choice(list(graph.units))
        observations = graph.observations(unit)
        upstream = rng.choice(observations).upstream if observations else None
        runs.append((graph, RunPosition(unit, upstream)))
    return runs


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="forethought bench rank-refresh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive_int, nargs="+", default=[10, 100, 300], help="concurrent application runs")
    parser.add_argument("--walks", type=positive_int, default=1000,
                        help="Monte Carlo walks per estimate (the demand service's default)")
    parser.add_argument("--refreshes", type=positive_int, default=20, help="re-rank refreshes timed per row")
    parser.add_argument("--cost-profile", default="llama-7b-a100", choices=sorted(PROFILES),
                        help="cost profile turning tokens into seconds")
    parser.add_argument("--seed", type=int, default=0)
    add_output_argument(parser, "rank-refresh")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    graphs = [load_application(path) for path in sorted(EXAMPLES.glob("*.yaml"))]
    seconds = CostModelSeconds(PROFILES[args.cost_profile], PROFILES)
    estimators = {graph.name: DemandEstimator(graph, seconds, walks=args.walks) for graph in graphs}
    table = ResultTable(["runs", "re-rank ms / refresh", "per run us", "re-estimate ms / run", "aim ms", "re-rank within aim"],
                        title=f"Re-ranking {len(graphs)} example applications ({args.walks} walks per estimate)")
    rerank_ms: list[float] = []
    for count in progress(args.runs, "run counts"):
        runs = positions(graphs, count, rng)
        started = time.perf_counter()
        estimates: list[DemandEstimate] = [estimators[graph.name].estimate(position, rng) for graph, position in runs]
        estimate_ms = 1000 * (time.perf_counter() - started) / count
        timings = []
        for refresh in range(args.refreshes):
            attained = [refresh * 0.5 * rng.random() for _ in estimates]
            started = time.perf_counter()
            for estimate, attained_s in zip(estimates, attained, strict=True):
                gittins_rank(estimate, attained_s)
            timings.append(1000 * (time.perf_counter() - started))
        refresh_ms = statistics.median(timings)
        rerank_ms.append(refresh_ms)
        table.add(count, refresh_ms, 1000 * refresh_ms / count, estimate_ms, PAPER_REFRESH_MS if count == 100 else None,
                  ("yes" if refresh_ms < PAPER_REFRESH_MS else "no") if count == 100 else None)
    command = " ".join(["forethought bench rank-refresh", *argv])
    write_table(args.out / "results.md", [table],
                preamble=f"# Rank refresh\n\n`{command}` (medians; re-estimate is the mean over the runs).")
    line_plot(args.out / "rerank.png", [LineSeries("re-rank (Eq. 1 from cached estimates)", args.runs, rerank_ms)],
              "Cost of one refresh of every run's Gittins rank", "concurrent application runs", "ms per refresh")
    return 0
