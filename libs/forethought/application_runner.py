"""``forethought app run FILE``: runs an application file against a live mesh (Hermes section 5's
applications, served for real), through the Python client's ``run_application_file``.

The file is registered with the demand service (kept if registered already), one run is drawn from
the file's own description and played through the front door: each LLM step's parallel requests as
Generate calls of the run (output capped by ``--max-tokens``), each tool step waited out (capped by
``--max-tool-s``) and reported. The run's watch stream is printed as it goes, then the ACT.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from forethought.arguments import input_file, positive_seconds
from forethought.cache import started_services
from forethought.client import AsyncForethoughtClient, ClientError
from forethought.client.applications import PlayOptions, StepPlayed, run_application_file
from forethought.client.results import ApplicationRun
from forethought.demand import UnitExecution
from forethought.domain import InvalidField

DEFAULT_ADDRESSES = {"scheduler": "127.0.0.1:50051", "demand": "127.0.0.1:50054"}


def addresses(args: argparse.Namespace) -> dict[str, str]:
    """The scheduler's and demand service's addresses: flags, else what `forethought up` started."""
    started = started_services()
    return {name: getattr(args, name) or started.get(name, default) for name, default in DEFAULT_ADDRESSES.items()}


async def run(args: argparse.Namespace) -> int:
    where = addresses(args)
    watchers: list[asyncio.Task[None]] = []
    async with AsyncForethoughtClient(where["scheduler"], timeout_s=args.timeout) as client:
        def started(run: ApplicationRun, steps: list[UnitExecution]) -> None:
            print(f"run {run.run_id}: {len(steps)} steps drawn ({' -> '.join(step.unit for step in steps)}); "
                  f"estimated {run.estimated_completion_s:.1f} s of service, rank {run.gittins_rank:.2f}", flush=True)
            watchers.append(asyncio.create_task(watch(client, run.run_id)))

        def played(step: StepPlayed) -> None:
            if step.answers:
                print(f"  {step.step}: {len(step.answers)} request(s); first answer: {step.answers[0].text[:100]!r}", flush=True)

        options = PlayOptions(args.model, args.max_tokens, args.max_tool_s, args.seed, args.max_prompt_tokens)
        try:
            finished = await run_application_file(client, where["demand"], args.file, options, started, played)
            await asyncio.wait_for(asyncio.gather(*watchers), args.timeout)
        finally:
            for watcher in watchers:
                watcher.cancel()
    print(f"finished: ACT {finished.act_s:.2f} s over {finished.steps} step executions; "
          f"{'learnt by the demand graph' if finished.learnt else 'not learnt'}", flush=True)
    return 0


async def watch(client: AsyncForethoughtClient, run_id: str) -> None:
    async for progress in client.watch_application(run_id):
        if progress.finished:
            print(f"  [{progress.at_s:6.2f} s] run {progress.state.lower()}: ACT {progress.act_s:.2f} s", flush=True)
        else:
            print(f"  [{progress.at_s:6.2f} s] {progress.step} #{progress.execution} {progress.state.lower()}; "
                  f"remaining {progress.remaining_s:.1f} s, rank {progress.gittins_rank:.2f}", flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forethought app", description="Run applications against the mesh (docs/applications.md).")
    commands = parser.add_subparsers(dest="command", required=True)
    play = commands.add_parser("run", help="run one application file against the mesh")
    play.add_argument("file", type=input_file, help="an application file (.yaml, .yml, .json; examples/applications/, docs/demand.md)")
    play.add_argument("--model", default="SmolLM2-135M-Instruct", help="the served model every LLM step runs on")
    play.add_argument("--max-tokens", type=int, default=32, help="cap on a step's drawn output length")
    play.add_argument("--max-tool-s", type=float, default=2.0, help="cap on a tool step's drawn duration")
    play.add_argument("--max-prompt-tokens", type=int, default=1024, help="cap on a step's drawn prompt length (the model's context)")
    play.add_argument("--seed", type=int, default=0, help="seed of the run's draw")
    play.add_argument("--scheduler", default="", help="scheduler address (default: the one `forethought up` started)")
    play.add_argument("--demand", default="", help="demand service address (default: the one `forethought up` started)")
    play.add_argument("--timeout", type=positive_seconds, default=300.0, help="seconds any one call may take")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        return asyncio.run(run(args))
    except (ClientError, InvalidField) as error:
        print(f"forethought app: {error}", file=sys.stderr)
        return 1
