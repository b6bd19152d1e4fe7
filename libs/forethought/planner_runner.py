"""``forethought run JOB.yaml``: plans a multi-LLM job file on the planner service, runs it on the mesh's
workers and follows its progress with a progress bar, then prints each stage's time beside the plan's.

``--job-id ID`` names the job: a job planned under that id already (one a stopped planner was running,
or one that finished) is run again without planning, and resumes from its state in Redis. docs/planner.md,
"Running a plan".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

import grpc
from tqdm import tqdm

from forethought.cache import UP_STATE_FILE
from forethought.domain import InvalidField
from forethought.planner.job_file import load_job_file
from forethought.rpc.channels import open_channel
from forethought.services.planner.servicer import job_to_proto
from forethought.v1 import planner_pb2, planner_pb2_grpc

DEFAULT_PLANNER = "127.0.0.1:50055"
STATE_NAMES = {planner_pb2.JOB_STATE_PLANNED: "planned", planner_pb2.JOB_STATE_RUNNING: "running",
               planner_pb2.JOB_STATE_DONE: "done", planner_pb2.JOB_STATE_FAILED: "failed"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forethought run", description=__doc__.split("\n\n")[0])
    parser.add_argument("job", help="a job file (.yaml, .yml or .json; examples/jobs/, docs/planner.md)")
    parser.add_argument("--planner", default=None,
                        help=f"planner address (default: the one `forethought up` started, else {DEFAULT_PLANNER})")
    parser.add_argument("--job-id", default="", help="the job's id; an id planned before is resumed, not planned again")
    parser.add_argument("--no-preemption", action="store_true", help="plan without preemption (SamuLLM 5.5)")
    parser.add_argument("--replan", action="store_true",
                        help="when models finish out of plan, search the stages left again (default: adjust the next stage)")
    parser.add_argument("--max-tokens", type=int, default=0, help="caps every request's output (0: its own limit)")
    parser.add_argument("--max-prompt-tokens", type=int, default=0,
                        help="keeps the last this many prompt tokens, an engine's context (0: whole prompts)")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between progress reads")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for planning")
    return parser


def planner_address(flag: str | None) -> str:
    if flag:
        return flag
    services = json.loads(UP_STATE_FILE.read_text())["services"] if UP_STATE_FILE.exists() else {}
    return str(services.get("planner", DEFAULT_PLANNER))


async def run(args: argparse.Namespace) -> int:
    try:
        job_file = load_job_file(args.job)
    except OSError as error:
        print(f"forethought run: {args.job}: {error.strerror or error}", file=sys.stderr)
        return 2
    except InvalidField as error:
        print(f"forethought run: {args.job}: {error.field}: {error.rule}", file=sys.stderr)
        return 2
    async with open_channel(planner_address(args.planner)) as channel:
        stub = planner_pb2_grpc.PlannerServiceStub(channel)
        job_id = args.job_id if args.job_id and await _planned(stub, args.job_id) else ""
        if not job_id:
            plan = await stub.Plan(planner_pb2.PlanRequest(
                job_id=args.job_id, job=job_to_proto(job_file), seed=job_file.seed, no_preemption=args.no_preemption,
                skip_baselines=True), timeout=args.timeout)
            job_id = plan.job_id
            print(f"planned {job_id}: {len(plan.stages)} stages, {plan.requests} requests, estimated "
                  f"{plan.estimated_makespan_s:.1f} s (searched in {plan.search_s:.2f} s)", flush=True)
        started = await stub.Run(planner_pb2.RunRequest(job_id=job_id, max_tokens=args.max_tokens, replan=args.replan,
                                                        max_prompt_tokens=args.max_prompt_tokens), timeout=60)
        if started.state == planner_pb2.JOB_STATE_DONE:
            print(f"job {job_id} was done already", flush=True)
        elif started.finished_requests:
            print(f"resuming {job_id}: {started.finished_requests} requests finished before", flush=True)
        try:
            last = await follow(stub, job_id, args.interval)
        except grpc.aio.AioRpcError as error:
            print(f"forethought run: lost the planner ({error.code().name}); job {job_id} is kept in Redis: "
                  f"`forethought run {args.job} --job-id {job_id}` resumes it", file=sys.stderr)
            return 1
    print(stage_table(last))
    if last.state != planner_pb2.JOB_STATE_DONE:
        print(f"forethought run: job {job_id} {STATE_NAMES.get(last.state, 'ended')}: {last.error}", file=sys.stderr)
        return 1
    return 0


async def _planned(stub: planner_pb2_grpc.PlannerServiceStub, job_id: str) -> bool:
    try:
        async for _ in stub.Status(planner_pb2.StatusRequest(job_id=job_id), timeout=30):
            return True
    except grpc.aio.AioRpcError as error:
        if error.code() == grpc.StatusCode.NOT_FOUND:
            return False
        raise
    return False


async def follow(stub: planner_pb2_grpc.PlannerServiceStub, job_id: str, interval: float) -> planner_pb2.StatusResponse:
    """Shows the job's progress as a bar until it ends; returns its last status."""
    last = planner_pb2.StatusResponse(job_id=job_id)
    with tqdm(desc=job_id, unit="req", dynamic_ncols=True) as bar:
        async for status in stub.Status(planner_pb2.StatusRequest(job_id=job_id, interval_s=interval)):
            bar.total = status.total_requests
            bar.update(status.finished_requests - bar.n)
            models = ", ".join(f"{p.model} {p.replicas}x{p.gpus}" for p in status.running)
            bar.set_postfix_str(f"stage {status.stage}/{status.stage_count} [{models}] plan ETA "
                                f"{status.estimated_remaining_s:.0f} s")
            last = status
    return last


def stage_table(status: planner_pb2.StatusResponse) -> str:
    """Each stage reached: the plan's estimate beside the time it took."""
    lines = [f"{'stage':>5} {'est_s':>9} {'actual_s':>9}"]
    lines += [f"{row.stage:>5} {row.estimated_s:>9.1f} {row.actual_s:>9.1f}" for row in status.stage_times]
    estimated = sum(row.estimated_s for row in status.stage_times)
    lines.append(f"job {status.job_id}: {STATE_NAMES.get(status.state, 'unknown')}, {status.finished_requests}/"
                 f"{status.total_requests} requests in {status.elapsed_s:.1f} s (the plan estimated {estimated:.1f} s)")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        return asyncio.run(run(args))
    except grpc.aio.AioRpcError as error:
        print(f"forethought run: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
