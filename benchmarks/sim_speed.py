"""``forethought bench sim``: how fast the discrete-event simulator replays a trace (Preble section 5's
simulator use; the speed that makes policy sweeps cheap).

Replays the first N requests of the Azure conversation trace on a cluster of engine cores and reports wall
(and CPU) time against simulated time, with the share of wall time spent inside ``EngineCore.step``. With
``--mooncake PATH`` it also replays that Mooncake trace (long prompts, heavy prefix reuse) on the same
cluster with the ``llama-7b-a100`` profile and its stated KV capacity; requests no engine can hold are
refused and counted.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from forethought.arguments import input_file, positive_int
from forethought.costmodel import PROFILES, CostModelExecutor
from forethought.engine.core import EngineConfig, EngineCore, StepOutput
from forethought.routing import ROUTER_NAMES
from forethought.sim.config import ClusterConfig, build_simulator
from forethought.workloads.azure import azure_trace_path, load_azure_trace
from forethought.workloads.mooncake import load_mooncake_trace
from forethought.workloads.workload import TraceRequest, Workload

from benchmarks.report import ResultTable, add_output_argument, write_table


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="forethought bench sim", description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=positive_int, default=None, help="requests to replay (default 10000)")
    parser.add_argument("--engines", type=positive_int, default=4)
    parser.add_argument("--router", default="least_load", choices=ROUTER_NAMES)
    parser.add_argument("--profile", default="llama-13b-a100", choices=sorted(PROFILES))
    parser.add_argument("--data-dir", type=Path, default=None, help="trace directory (default ../shared/data)")
    parser.add_argument("--quick", action="store_true", help="1,000 requests")
    parser.add_argument("--mooncake", type=input_file, default=None, help="also replay this Mooncake JSONL trace")
    parser.add_argument("--mooncake-requests", type=positive_int, default=None, help="its first N requests (default: all)")
    parser.add_argument("--mooncake-profile", default="llama-7b-a100", choices=sorted(PROFILES))
    add_output_argument(parser, "sim")
    args = parser.parse_args(list(argv))
    args.requests = args.requests or (1000 if args.quick else 10_000)
    return args


@dataclass
class StepTimer:
    """Wall time spent inside ``EngineCore.step`` across every engine."""

    seconds: float = 0.0
    steps: int = 0


class TimedEngineCore(EngineCore):
    """The engine core, adding the wall time of each iteration to a shared ``StepTimer``."""

    def __init__(self, config: EngineConfig, executor: CostModelExecutor, timer: StepTimer) -> None:
        super().__init__(config, executor)
        self.timer = timer

    def step(self, now: float) -> StepOutput:
        started = time.perf_counter()
        output = super().step(now)
        self.timer.seconds += time.perf_counter() - started
        self.timer.steps += 1
        return output


@dataclass(frozen=True)
class Replay:
    """One timed replay: what ran, its simulated and wall seconds, and the engine's share."""

    trace: str
    requests: int
    simulated_s: float
    wall_s: float
    cpu_s: float
    events: int
    steps: int
    step_s: float
    unfinished: int
    refused: int


def replay(trace: str, requests: Sequence[TraceRequest], config: ClusterConfig) -> Replay:
    timer = StepTimer()
    simulator = build_simulator(Workload(requests=tuple(requests)), config,
                                engine_factory=lambda engine, executor: TimedEngineCore(engine, executor, timer))
    started, cpu_started = time.perf_counter(), time.process_time()
    result = simulator.run()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return Replay(trace, len(requests), result.end_s, wall, cpu, result.events, timer.steps, timer.seconds,
                  result.unfinished, len(result.refused))


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    requests = load_azure_trace(azure_trace_path("conv", args.data_dir), limit=args.requests)
    runs = [(f"Azure conv ({args.profile})", requests, ClusterConfig(engines=args.engines, profile=args.profile, router=args.router))]
    if args.mooncake is not None:
        mooncake = load_mooncake_trace(args.mooncake, limit=args.mooncake_requests)
        runs.append((f"Mooncake conversation ({args.mooncake_profile})", mooncake,
                     ClusterConfig(engines=args.engines, profile=args.mooncake_profile, router=args.router)))
    table = ResultTable(["trace", "requests", "engines", "router", "simulated (s)", "wall (s)", "CPU (s)", "simulated / wall",
                         "events", "engine steps", "wall in EngineCore.step", "unfinished", "refused"],
                        title="Simulator speed")
    for trace, trace_requests, config in runs:
        run = replay(trace, trace_requests, config)
        table.add(run.trace, run.requests, args.engines, args.router, run.simulated_s, run.wall_s, run.cpu_s,
                  run.simulated_s / run.wall_s, run.events, run.steps, f"{100 * run.step_s / run.wall_s:.0f}%",
                  run.unfinished, run.refused)
    write_table(args.out / "table.md", [table], f"Command: `forethought bench sim {' '.join(argv)}`")
    return 0
