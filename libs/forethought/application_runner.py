"""``forethought app run FILE``: runs an application file against a live mesh (Hermes section 5's
applications, served for real).

The file is registered with the demand service (kept if registered already), one run is drawn from
the file's own description (its branches and length distributions, as profiling draws them), and the
run is played through the front door: each LLM step sends its parallel requests as Generate calls
naming the run and the step (prompt and output lengths as drawn, output capped by ``--max-tokens``),
each tool step waits out its drawn duration (capped by ``--max-tool-s``) and is reported. The watch
stream prints every step's state with the run's rank, then the ACT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

import grpc

from forethought.cache import UP_STATE_FILE
from forethought.demand import BackendKind, UnitExecution, application_from_dict, draw_runs
from forethought.documents import read_document
from forethought.v1 import common_pb2, demand_pb2, demand_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc

DEFAULT_ADDRESSES = {"scheduler": "127.0.0.1:50051", "demand": "127.0.0.1:50054"}
FILLER = ("Summarize what this step of the application must do, and then do it carefully and concisely. "
          "Explain each decision in one short sentence. ")
"""Prompt text repeated to a step's drawn prompt length (a replay of lengths, not of a real task's text)."""


def step_prompt(application: str, step: str, index: int, input_tokens: int) -> str:
    """About ``input_tokens`` tokens of English (four characters a token) for one request of a step."""
    head = f"Application {application}, step {step}, request {index}. "
    body = FILLER * max(1, (4 * input_tokens - len(head)) // len(FILLER))
    return head + body


def addresses(args: argparse.Namespace) -> dict[str, str]:
    """The scheduler's and demand service's addresses: flags, else what `forethought up` started."""
    started = json.loads(UP_STATE_FILE.read_text())["services"] if UP_STATE_FILE.exists() else {}
    return {name: getattr(args, name) or started.get(name, default) for name, default in DEFAULT_ADDRESSES.items()}


async def run_application(args: argparse.Namespace) -> int:
    content = Path(args.file).read_text()
    data = read_document(args.file)
    graph = application_from_dict(data, random.Random(0))  # checks the file before anything is sent
    name = graph.name
    (run,) = draw_runs(data, 1, random.Random(args.seed))
    where = addresses(args)
    async with grpc.aio.insecure_channel(where["scheduler"]) as front, grpc.aio.insecure_channel(where["demand"]) as demand_channel:
        demand = demand_pb2_grpc.DemandServiceStub(demand_channel)
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(front)
        await demand.RegisterApplication(demand_pb2.RegisterApplicationRequest(
            application_file=content, keep_existing=True), timeout=args.timeout)
        submitted = await scheduler.SubmitApplication(scheduler_pb2.SubmitApplicationRequest(application=name), timeout=args.timeout)
        print(f"run {submitted.run_id} of {name}: {len(run)} steps drawn; estimated {submitted.estimated_completion_s:.1f} s "
              f"of service (rank {submitted.gittins_rank:.2f})", flush=True)
        watcher = asyncio.create_task(_watch(scheduler, submitted.run_id, time.monotonic()))
        try:
            for execution in run:
                await _play(scheduler, args, name, submitted.run_id, execution, graph.units[execution.unit].backend.kind)
            finished = await scheduler.FinishApplication(
                scheduler_pb2.FinishApplicationRequest(run_id=submitted.run_id), timeout=args.timeout)
            await asyncio.wait_for(watcher, args.timeout)
        except BaseException:
            watcher.cancel()
            raise
    print(f"finished: ACT {finished.act_s:.2f} s over {finished.steps} step executions; "
          f"{'learnt by the demand graph' if finished.learnt else 'not learnt'}", flush=True)
    return 0


async def _play(scheduler: scheduler_pb2_grpc.SchedulerServiceStub, args: argparse.Namespace, application: str,
                run_id: str, execution: UnitExecution, kind: BackendKind) -> None:
    consumption = execution.consumption
    if kind is BackendKind.TOOL:
        duration_s = min(consumption.tool_duration_s, args.max_tool_s)
        await asyncio.sleep(duration_s)
        await scheduler.ReportStep(scheduler_pb2.ReportStepRequest(run_id=run_id, step=execution.unit, duration_s=duration_s),
                                   timeout=args.timeout)
        return
    max_tokens = max(1, min(consumption.output_tokens, args.max_tokens))
    requests = [scheduler_pb2.GenerateRequest(
        model=args.model, text=step_prompt(application, execution.unit, index, consumption.input_tokens),
        max_tokens=max_tokens, application_id=run_id, step=execution.unit, return_text=True,
        sampling=common_pb2.SamplingParams(temperature=0.0),
    ) for index in range(consumption.parallelism)]
    texts = await asyncio.gather(*(_generate(scheduler, request, args.timeout) for request in requests))
    print(f"  {execution.unit}: {len(requests)} request(s); first answer: {texts[0][:120]!r}", flush=True)


async def _generate(scheduler: scheduler_pb2_grpc.SchedulerServiceStub, request: scheduler_pb2.GenerateRequest,
                    timeout_s: float) -> str:
    return "".join([reply.text async for reply in scheduler.Generate(request, timeout=timeout_s)])


async def _watch(scheduler: scheduler_pb2_grpc.SchedulerServiceStub, run_id: str, started: float) -> None:
    async for message in scheduler.WatchApplication(scheduler_pb2.WatchApplicationRequest(run_id=run_id)):
        state = scheduler_pb2.StepState.Name(message.state).removeprefix("STEP_STATE_").lower()
        if message.finished:
            print(f"  [{time.monotonic() - started:6.2f} s] run {state}: ACT {message.act_s:.2f} s", flush=True)
        else:
            print(f"  [{time.monotonic() - started:6.2f} s] {message.step} #{message.execution} {state}; "
                  f"remaining {message.remaining_s:.1f} s, rank {message.gittins_rank:.2f}", flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forethought app", description=__doc__.split("\n\n")[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run one application file against the mesh")
    run.add_argument("file", help="an application file (.yaml, .yml, .json; examples/applications/, docs/demand.md)")
    run.add_argument("--model", default="SmolLM2-135M-Instruct", help="the served model every LLM step runs on")
    run.add_argument("--max-tokens", type=int, default=32, help="cap on a step's drawn output length")
    run.add_argument("--max-tool-s", type=float, default=2.0, help="cap on a tool step's drawn duration")
    run.add_argument("--seed", type=int, default=0, help="seed of the run's draw")
    run.add_argument("--scheduler", default="", help="scheduler address (default: the one `forethought up` started)")
    run.add_argument("--demand", default="", help="demand service address (default: the one `forethought up` started)")
    run.add_argument("--timeout", type=float, default=300.0, help="seconds any one call may take")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        return asyncio.run(run_application(args))
    except grpc.aio.AioRpcError as error:
        print(f"forethought app: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
