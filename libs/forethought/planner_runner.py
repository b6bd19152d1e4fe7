"""``forethought run JOB.yaml``: plans a multi-LLM job file on the planner service, runs it on the mesh's
workers and follows its progress with a progress bar, then prints each stage's time beside the plan's.

``--job-id ID`` names the job: a job planned under that id already is not planned again. One that ended is
run again and resumes from its state in Redis; one a planner runs (or takes up) is followed. docs/planner.md,
"Running a plan".
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import grpc
from tqdm import tqdm

from forethought.arguments import positive_seconds
from forethought.cache import started_services
from forethought.client import ClientError
from forethought.client.jobs import AsyncJobClient, JobProgress, require_the_same_job
from forethought.domain import InvalidField
from forethought.planner.job_file import JobFile, load_job_file

DEFAULT_PLANNER = "127.0.0.1:50055"


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
    parser.add_argument("--profile", action="append", default=[], metavar="NAME",
                        help="a calibrated cost profile (forethought calibrate) on the planner's host, by name or "
                             "path: the plan's estimates for the models of its shape; repeatable")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between progress reads")
    parser.add_argument("--timeout", type=positive_seconds, default=600.0, help="seconds to wait for planning")
    return parser


def planner_address(flag: str | None) -> str:
    if flag:
        return flag
    return started_services().get("planner", DEFAULT_PLANNER)


def read_job_file(path: str, command: str) -> JobFile | None:
    """The job file at ``path``; None, once its problem is printed (the file or the field and rule)."""
    try:
        return load_job_file(path)
    except OSError as error:
        print(f"{command}: {path}: {error.strerror or error}", file=sys.stderr)
    except InvalidField as error:
        print(f"{command}: {path}: {error.field}: {error.rule}", file=sys.stderr)
    return None


async def run(args: argparse.Namespace) -> int:
    job_file = read_job_file(args.job, "forethought run")
    if job_file is None:
        return 2
    async with AsyncJobClient(planner_address(args.planner), timeout_s=args.timeout) as jobs:
        earlier = await jobs.planned(args.job_id) if args.job_id else None
        try:
            require_the_same_job(earlier, args.job_id, job_file.name)
        except InvalidField as error:
            print(f"forethought run: --job-id {error.rule}", file=sys.stderr)
            return 2
        job_id = args.job_id if earlier is not None else ""
        if not job_id:
            plan = await jobs.plan(job_file, job_id=args.job_id, preemption=not args.no_preemption,
                                   cost_profiles=args.profile)
            job_id = plan.job_id
            print(f"planned {job_id}: {plan.stages} stages, {plan.requests} requests, estimated "
                  f"{plan.estimated_makespan_s:.1f} s (searched in {plan.search_s:.2f} s)", flush=True)
        started = await jobs.run(job_id, max_tokens=args.max_tokens, max_prompt_tokens=args.max_prompt_tokens,
                                 replan=args.replan)
        if started.state == "DONE":
            print(f"job {job_id} was done already", flush=True)
        elif started.finished_requests:
            print(f"resuming {job_id}: {started.finished_requests} requests finished before", flush=True)
        try:
            last = await follow(jobs, job_id, args.interval)
        except ClientError as error:
            print(f"forethought run: lost the planner ({error.code.name}); job {job_id} is kept in Redis, and a "
                  f"planner of the namespace takes its run up: `forethought run {args.job} --job-id {job_id}` "
                  "follows it again", file=sys.stderr)
            return 1
    print(stage_table(last))
    if last.state != "DONE":
        print(f"forethought run: job {job_id} {last.state.lower()}: {last.error}", file=sys.stderr)
        return 1
    return 0


async def follow(jobs: AsyncJobClient, job_id: str, interval: float) -> JobProgress:
    """Shows the job's progress as a bar until it ends; returns its last reading."""
    last: JobProgress | None = None
    with tqdm(desc=job_id, unit="req", dynamic_ncols=True) as bar:
        async for progress in jobs.status(job_id, interval_s=interval):
            bar.total = progress.total_requests
            bar.update(progress.finished_requests - bar.n)
            bar.set_postfix_str(f"stage {progress.stage}/{progress.stage_count} [{', '.join(progress.running)}] plan ETA "
                                f"{progress.estimated_remaining_s:.0f} s")
            last = progress
    if last is None:
        raise ClientError(grpc.StatusCode.UNAVAILABLE, f"the planner sent no status of job {job_id}")
    return last


def stage_table(progress: JobProgress) -> str:
    """Each stage reached: the plan's estimate beside the time it took."""
    lines = [f"{'stage':>5} {'est_s':>9} {'actual_s':>9}"]
    lines += [f"{row.stage:>5} {row.estimated_s:>9.1f} {row.actual_s:>9.1f}" for row in progress.stage_times]
    estimated = sum(row.estimated_s for row in progress.stage_times)
    lines.append(f"job {progress.job_id}: {progress.state.lower()}, {progress.finished_requests}/"
                 f"{progress.total_requests} requests in {progress.elapsed_s:.1f} s (the plan estimated {estimated:.1f} s)")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        return asyncio.run(run(args))
    except ClientError as error:
        print(f"forethought run: {error}", file=sys.stderr)
        return 1
