"""The ``forethought`` command: serve a service, run the embedded default, talk to it, run benchmarks."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from forethought.arguments import input_file, positive_int, positive_number, positive_seconds
from forethought.services import SERVICE_NAMES

if TYPE_CHECKING:
    from forethought.client import AsyncForethoughtClient
    from forethought.domain import Usage
    from forethought.planner.job_file import JobFile
    from forethought.v1 import planner_pb2

DEFAULT_SCHEDULER = "127.0.0.1:50051"
DEFAULT_WORKERS = {"vllm": 1, "sim": 2}
NOT_TEXT_ENGINES = frozenset({"sim", "null"})
"""Engines that produce token ids without a model: their detokenized output is not text."""


def _up(args: argparse.Namespace) -> int:
    from forethought.launcher import StopSignal, UpOptions, options_problem, run_up

    stop = StopSignal()
    stop.install()  # before anything slow: a stop is honoured from the first moment
    workers = args.workers if args.workers is not None else DEFAULT_WORKERS[args.engine]
    from forethought.predict.shipped import resolve_predictor

    try:
        predictor = resolve_predictor(Path(args.predictor_model) if args.predictor_model else None)
    except ValueError as error:
        print(f"forethought up: --predictor-model: {error}", file=sys.stderr)
        return 2
    options = UpOptions(workers=workers, engine=args.engine, model=args.model, base_port=args.base_port,
                        http_port=args.http_port, router=args.router, policy=args.policy, sim_speedup=args.sim_speedup,
                        log_format=args.log_format, predictor_model=predictor.directory)
    problem = options_problem(options)
    if problem is not None:
        print(f"forethought up: {problem}", file=sys.stderr)
        return 2
    print(f"length forecasts: {predictor.description}", flush=True)
    return run_up(options, stop)


async def _generate(args: argparse.Namespace) -> int:
    """A chat turn through the model's chat template, or with ``--raw`` the text as a plain completion."""
    from forethought.cache import started_services
    from forethought.client import AsyncForethoughtClient, ChatMessage, ClientError
    from forethought.cluster.ports import accepts_connections
    from forethought.domain import SamplingParams, ServiceClass, Usage

    scheduler = args.scheduler or started_services().get("scheduler", DEFAULT_SCHEDULER)
    chat = None if args.raw else [*([ChatMessage("system", args.system)] if args.system else []), ChatMessage("user", args.text)]
    root_certs = args.tls_ca.read_bytes() if args.tls_ca else None
    async with AsyncForethoughtClient(scheduler, timeout_s=args.timeout, token=args.token or None,
                                      root_certs=root_certs) as client:
        tokens, worker_id, forecast = 0, "", 0.0
        try:
            async for chunk in client.generate(
                    model=args.model, max_tokens=args.max_tokens, prompt=args.text if args.raw else None, chat=chat,
                    sampling=SamplingParams(temperature=args.temperature), service_class=ServiceClass.BE):
                tokens += len(chunk.token_ids)
                worker_id = chunk.worker_id or worker_id
                forecast = chunk.predicted_output_tokens or forecast
                print(chunk.text, end="", flush=True)
                if chunk.finish_reason is not None:
                    engine = await _engine_of(client, worker_id)
                    usage = chunk.usage or Usage(0, 0, 0, 0.0)  # a request cancelled while it waited ran nothing
                    print("\n" + generation_footer(tokens, usage, forecast, worker_id, engine, chunk.finish_reason.name))
        except ClientError as error:
            print(f"\nforethought generate: {error.code.name}: {error.message}", file=sys.stderr)
            if error.code is grpc.StatusCode.UNAVAILABLE and not tokens and not accepts_connections(scheduler):
                print(f"nothing listens at {scheduler}: start the mesh with `forethought up` (`forethought status` "
                      "shows what runs), or name the scheduler with --scheduler", file=sys.stderr)
            return 1
    return 0


async def _engine_of(client: AsyncForethoughtClient, worker_id: str) -> str:
    """The engine kind of ``worker_id`` as the scheduler lists it; empty when it cannot be told."""
    from forethought.client import ClientError

    try:
        workers = await client.list_workers(timeout_s=5)
    except ClientError:
        return ""
    return next((worker.engine for worker in workers if worker.worker_id == worker_id), "")


def generation_footer(tokens: int, usage: Usage, forecast: float, worker_id: str, engine: str, finish: str) -> str:
    """The line under a streamed answer: size, cache, forecast, latency, where it ran and why it ended."""
    parts = [f"{tokens} tokens", f"prompt {usage.prompt_tokens} (cached {usage.cached_prompt_tokens})",
             f"forecast {forecast:.0f}" if forecast else "no forecast (ordered FCFS)",
             f"ttft {usage.ttft_s * 1000:.0f} ms", f"{worker_id} ({engine or 'engine unknown'})",
             f"finish {finish}"]
    footer = "[" + "; ".join(parts) + "]"
    if engine in NOT_TEXT_ENGINES:
        footer += f"\n[the {engine} engine makes token ids for load tests, not text: `forethought up` without --engine serves real text]"
    return footer


async def _status(args: argparse.Namespace) -> int:
    from forethought.cache import started_services
    from forethought.rpc.channels import check_health, open_channel
    from forethought.services.http.readiness import check_ready
    from forethought.v1 import scheduler_pb2, scheduler_pb2_grpc

    services = {"scheduler": args.scheduler} if args.scheduler else started_services() or {"scheduler": DEFAULT_SCHEDULER}
    print(f"{'service':<12} {'address':<18} health")
    for name, address in services.items():
        if name == "http":
            print(f"{name:<12} {address:<18} {await check_ready(address)}")
            continue
        async with open_channel(address) as channel:
            print(f"{name:<12} {address:<18} {await check_health(channel)}")
    async with open_channel(services.get("scheduler", DEFAULT_SCHEDULER)) as channel:
        try:
            reply = await scheduler_pb2_grpc.SchedulerServiceStub(channel).ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5)
        except grpc.aio.AioRpcError as error:
            print(f"workers: scheduler unreachable ({error.code().name})")
            return 1
    print(f"\n{'worker':<12} {'address':<18} {'engine':<6} {'health':<8} running waiting kv_use heartbeat")
    for worker in reply.workers:
        load = worker.load
        print(f"{worker.worker_id:<12} {worker.address:<18} {worker.engine:<6} "
              f"{scheduler_pb2.WorkerHealth.Name(worker.health).removeprefix('WORKER_HEALTH_'):<8} "
              f"{load.real_time.running + load.best_effort.running:>7} {load.real_time.waiting + load.best_effort.waiting:>7} "
              f"{load.kv_cache_usage:>6.1%} {worker.heartbeat_age_s:>7.1f} s")
    for engine in sorted({worker.engine for worker in reply.workers} & NOT_TEXT_ENGINES):
        print(f"\nnote: {engine} workers make token ids for load tests, not text "
              "(`forethought up` without --engine serves real text with vLLM)")
    return 0


DEFAULT_PLANNER = "127.0.0.1:50055"


def _plan(args: argparse.Namespace) -> int:
    """Plans a job file on the planner service (or in-process with ``--local``) and prints the stages."""
    from forethought.domain import InvalidField
    from forethought.planner_runner import read_job_file
    from forethought.rpc.errors import ServiceError

    job_file = read_job_file(args.job, "forethought plan")
    if job_file is None:
        return 2
    try:
        reply = _plan_locally(job_file, args) if args.local else asyncio.run(_plan_remotely(job_file, args))
    except (InvalidField, ServiceError) as error:
        print(f"forethought plan: {error}", file=sys.stderr)
        return 1
    except grpc.aio.AioRpcError as error:
        print(f"forethought plan: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
    print(plan_table(reply, job_file.job.devices.count, job_file.hardware))
    return 0


def _plan_request(job_file: JobFile, args: argparse.Namespace) -> planner_pb2.PlanRequest:
    from forethought.services.planner.servicer import job_to_proto
    from forethought.v1 import planner_pb2

    return planner_pb2.PlanRequest(job=job_to_proto(job_file), seed=job_file.seed, no_preemption=args.no_preemption,
                                   skip_baselines=args.no_baselines, cost_profiles=args.profile)


def _plan_locally(job_file: JobFile, args: argparse.Namespace) -> planner_pb2.PlanResponse:
    import time

    from forethought.planner.job_file import plan_job, resolve_cdfs
    from forethought.services.planner.servicer import load_cost_profiles, plans_to_proto
    from forethought.services.planner.shell import castillo_loader

    profiles = load_cost_profiles(args.profile)
    cdfs = resolve_cdfs(job_file, castillo_loader(""))
    plans = plan_job(job_file, cdfs, time.perf_counter, not args.no_preemption, not args.no_baselines, profiles)
    return plans_to_proto(job_file.name, job_file.job, plans)


async def _plan_remotely(job_file: JobFile, args: argparse.Namespace) -> planner_pb2.PlanResponse:
    from forethought.cache import started_services
    from forethought.rpc.channels import open_channel
    from forethought.v1 import planner_pb2_grpc

    address = args.planner or started_services().get("planner", DEFAULT_PLANNER)
    async with open_channel(address) as channel:
        return await planner_pb2_grpc.PlannerServiceStub(channel).Plan(_plan_request(job_file, args), timeout=args.timeout)


def plan_table(reply: planner_pb2.PlanResponse, devices: int, hardware: str) -> str:
    """The stages of a ``PlanResponse`` as a table, with the heuristics' estimates under it."""
    lines = [f"job {reply.job_id}: {reply.requests} requests on {devices}x {hardware}; "
             f"searched in {reply.search_s:.2f} s ({reply.simulations} model runs simulated)",
             f"{'stage':>5} {'start_s':>9} {'est_s':>9}  {'models (replicas x tensor parallel)':<48} finishes"]
    for number, stage in enumerate(reply.stages, start=1):
        models = ", ".join(f"{p.model} {p.replicas}x{p.gpus}" for p in stage.placements)
        lines.append(f"{number:>5} {stage.start_s:>9.1f} {stage.estimated_s:>9.1f}  {models:<48} "
                     f"{', '.join(stage.finished_models)}")
    estimate = reply.estimated_makespan_s
    summary = [f"SamuLLM {estimate:.1f} s"]
    for name, baseline in (("Max-heuristic", reply.baseline_max_heuristic_s), ("Min-heuristic", reply.baseline_min_heuristic_s)):
        if baseline > 0:
            summary.append(f"{name} {baseline:.1f} s ({baseline / estimate:.2f}x)")
    lines.append("estimated inference time: " + "; ".join(summary))
    return "\n".join(lines)


def _bench(argv: list[str]) -> int:
    """Runs ``benchmarks/<name>`` of the source checkout this package was installed from."""
    checkout = Path(__file__).resolve().parents[2]
    if not (checkout / "benchmarks" / "__init__.py").is_file():
        print("forethought bench: the benchmarks live in the source checkout (benchmarks/), not in an installed "
              "wheel; clone the repository and run `scripts/install` there", file=sys.stderr)
        return 2
    # Benchmarks start services and helpers as subprocesses that import ``benchmarks`` too.
    sys.path.insert(0, str(checkout))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))
    from benchmarks import main as bench_main

    return bench_main(argv)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forethought", description="A demand-aware gRPC serving mesh for LLM applications.")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run one service (flags: forethought serve NAME --help)", add_help=False)
    serve.add_argument("service", choices=SERVICE_NAMES)
    serve.add_argument("rest", nargs=argparse.REMAINDER)

    up = commands.add_parser("up", help="start Redis, every service and N workers on this machine")
    up.add_argument("--workers", type=positive_int, default=None,
                    help="workers to start (default: 1 with vllm, whose engine uses every core; 2 with sim)")
    up.add_argument("--engine", choices=("vllm", "sim"), default="vllm",
                    help="vllm serves real model text (default); sim is the native engine with modelled time, for load tests")
    up.add_argument("--model", default="SmolLM2-135M-Instruct",
                    help="the model the workers serve: the packaged SmolLM2-135M-Instruct (default) or, with vllm, a "
                         "Hugging Face model folder (docs/vllm.md)")
    up.add_argument("--base-port", type=int, default=50051, help="scheduler port; the others follow it")
    up.add_argument("--http-port", type=int, default=8000, help="port of the OpenAI-compatible HTTP front door (docs/http.md)")
    up.add_argument("--router", default="e2", help="placement policy (docs/routing.md)")
    up.add_argument("--policy", default="ssjf", help="queue order (docs/queueing.md)")
    up.add_argument("--predictor-model", default=None,
                    help="predictor artifact folder (default: the fine-tuned one in ~/.cache/forethought/predictor "
                         "if trained, else the one the package ships)")
    up.add_argument("--sim-speedup", type=positive_number, default=1.0,
                    help="with sim: modelled seconds per wall second (default 1, real time)")
    up.add_argument("--log-format", choices=("text", "json"), default="text",
                    help="every service's log lines: text (default) or one JSON object a line (docs/configuration.md)")

    generate = commands.add_parser("generate", help="stream an answer through the scheduler")
    generate.add_argument("text", help="the user's message (with --raw, the prompt to complete)")
    generate.add_argument("--raw", action="store_true", help="send TEXT as a raw completion prompt, without the chat template")
    generate.add_argument("--system", default="", help="a system message before the user's")
    generate.add_argument("--model", default="SmolLM2-135M-Instruct", help="the model to answer (default: %(default)s)")
    generate.add_argument("--max-tokens", type=int, default=128, help="the most tokens to generate (default: %(default)s)")
    generate.add_argument("--temperature", type=float, default=0.0, help="0 (default) is greedy; up to 2")
    generate.add_argument("--scheduler", default=None,
                          help=f"scheduler address (default: the one `forethought up` started, else {DEFAULT_SCHEDULER})")
    generate.add_argument("--timeout", type=positive_seconds, default=120.0, help="seconds to wait for the whole answer")
    generate.add_argument("--token", default=os.environ.get("FORETHOUGHT_TOKEN", ""),
                          help="the tenant's bearer token, for a scheduler with a tenants file [env FORETHOUGHT_TOKEN]")
    generate.add_argument("--tls-ca", type=input_file, default=None,
                          help="PEM root certificates: call the scheduler over TLS (docs/access.md)")

    status = commands.add_parser("status", help="health of every service and worker")
    status.add_argument("--scheduler", default=None,
                        help=f"show this scheduler and its workers only (default: every service `forethought up` started, "
                             f"else {DEFAULT_SCHEDULER})")

    plan = commands.add_parser("plan", help="plan a multi-LLM job file (SamuLLM) and print its stages")
    plan.add_argument("job", help="a job file (.yaml, .yml or .json; examples/jobs/, docs/planner.md)")
    plan.add_argument("--planner", default=None,
                      help=f"planner address (default: the one `forethought up` started, else {DEFAULT_PLANNER})")
    plan.add_argument("--local", action="store_true", help="plan in this process, without a planner service")
    plan.add_argument("--no-preemption", action="store_true", help="keep every started model on its plan to the end")
    plan.add_argument("--no-baselines", action="store_true", help="skip the Max- and Min-heuristics")
    plan.add_argument("--profile", action="append", default=[], metavar="NAME",
                      help="a calibrated cost profile (forethought calibrate), by name or path: the models of its shape "
                           "are simulated with its fitted latency and load time; repeatable")
    plan.add_argument("--timeout", type=positive_seconds, default=600.0, help="seconds to wait for the planner")

    commands.add_parser("run", help="plan a multi-LLM job file and run it on the workers (forethought run --help)",
                        add_help=False)
    commands.add_parser("app", help="run an application file against the mesh (forethought app run FILE; docs/applications.md)",
                        add_help=False)
    commands.add_parser("calibrate", help="profile a real engine and fit the planner's latency model (forethought calibrate --help)",
                        add_help=False)
    commands.add_parser("train-predictor", help="train the output-length predictor (forethought train-predictor --help)", add_help=False)
    bench = commands.add_parser("bench", help="run a named benchmark (forethought bench NAME --help)", add_help=False)
    bench.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # serve and bench hand every later argument, --help included, to the service or benchmark.
    if argv[:1] == ["serve"] and len(argv) > 1 and argv[1] in SERVICE_NAMES:
        from forethought.rpc.server import main as serve_main
        from forethought.services import service_spec

        return serve_main(service_spec(argv[1]), argv[2:])
    if argv[:1] == ["run"]:
        from forethought.planner_runner import main as run_main

        return run_main(argv[1:])
    if argv[:1] == ["app"]:
        from forethought.application_runner import main as app_main

        return app_main(argv[1:])
    if argv[:1] == ["calibrate"]:
        from forethought.calibrate_runner import main as calibrate_main

        return calibrate_main(argv[1:])
    if argv[:1] == ["train-predictor"]:
        from forethought.predict.train import main as train_main

        return train_main(argv[1:])
    if argv[:1] == ["bench"]:
        return _bench(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "up":
        return _up(args)
    if args.command == "generate":
        return asyncio.run(_generate(args))
    if args.command == "plan":
        return _plan(args)
    return asyncio.run(_status(args))


if __name__ == "__main__":
    sys.exit(main())
