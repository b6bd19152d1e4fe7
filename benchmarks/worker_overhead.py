"""Benchmark ``worker-overhead``: what the worker and the mesh cost over bare vLLM (DESIGN.md, Engines).

One vLLM engine, one workload, four ways in, measured side by side in one run: vLLM's
``AsyncLLM.generate`` called directly; the same engine through ``VllmEngineBackend``; through the
worker's gRPC service; and through the whole mesh (scheduler -> worker, with Redis, the registry and
the prefix index). The worker and scheduler run in this process over the same engine, so the gRPC rows
carry their serialization and scheduling on the same cores. Every request has a distinct random prompt
so the prefix cache favours no target; rounds alternate the order of targets.

``forethought bench worker-overhead [--concurrency 1 4 16] [--rounds 2]``; goal: throughput within 5%
of bare vLLM, TTFT within 10 ms.

With ``--variant SPEC ...`` it compares engine settings instead: one ``VllmEngineBackend`` per spec, all
started before the first round (an idle engine sleeps), measured in alternating order like the targets
above. A spec is comma-separated ``key=value``: lower-case keys are ``VllmEngineOptions`` fields
(``dtype=float32,max_num_seqs=32``), upper-case keys are environment variables of the engine's processes
(``VLLM_CPU_NUM_OF_RESERVED_CPU=0``); the spec ``default`` is the options' defaults.

``--step-profile`` runs the first variant's engine inside this process instead (no IPC) and splits its
decode steps into phases: scheduling, input preparation, model forward, logits, sampling, output handling.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import os
import random
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from forethought.arguments import positive_int, positive_number
from forethought.backends.protocol import EngineBackend
from forethought.domain import GenerationRequest, SamplingParams
from forethought.v1 import (
    common_pb2,
    scheduler_pb2,
    scheduler_pb2_grpc,
    worker_pb2,
    worker_pb2_grpc,
)

from benchmarks.report import (
    LineSeries,
    ResultTable,
    add_output_argument,
    line_plot,
    write_table,
)


@dataclass(frozen=True)
class RequestTiming:
    ttft_s: float
    output_tokens: int


class Target(Protocol):
    """One way into the engine: runs one request to completion and reports its timing."""

    name: str

    async def run(self, prompt: tuple[int, ...], max_tokens: int) -> RequestTiming: ...


class DirectVllmTarget:
    """vLLM's own ``AsyncLLM.generate``, no Forethought code on the path."""

    name = "vllm direct"

    def __init__(self, engine: object) -> None:
        self._engine = engine

    async def run(self, prompt: tuple[int, ...], max_tokens: int) -> RequestTiming:
        from vllm import SamplingParams as VllmSamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        params = VllmSamplingParams(
            max_tokens=max_tokens, temperature=0.0, ignore_eos=True, output_kind=RequestOutputKind.DELTA
        )
        started = time.perf_counter()
        ttft = 0.0
        tokens = 0
        async for output in self._engine.generate(
            TokensPrompt(prompt_token_ids=list(prompt)), params, uuid.uuid4().hex
        ):
            if tokens == 0 and output.outputs[0].token_ids:
                ttft = time.perf_counter() - started
            tokens += len(output.outputs[0].token_ids)
        return RequestTiming(ttft, tokens)


class BackendTarget:
    """Any ``EngineBackend``: ``VllmEngineBackend`` in process, or a client of a worker service."""

    def __init__(self, backend: EngineBackend, name: str = "VllmEngineBackend") -> None:
        self._backend = backend
        self.name = name

    async def run(self, prompt: tuple[int, ...], max_tokens: int) -> RequestTiming:
        request = GenerationRequest(
            uuid.uuid4().hex, prompt, max_tokens, sampling=SamplingParams(temperature=0.0, ignore_eos=True)
        )
        started = time.perf_counter()
        ttft = 0.0
        tokens = 0
        async for chunk in self._backend.generate(request):
            if tokens == 0 and chunk.token_ids:
                ttft = time.perf_counter() - started
            tokens += len(chunk.token_ids)
        return RequestTiming(ttft, tokens)


class GrpcStreamTarget:
    """A server-streaming Generate over gRPC (the worker service or the scheduler)."""

    def __init__(self, name: str, open_stream: Callable[[tuple[int, ...], int], AsyncIterator[Any]]) -> None:
        self.name = name
        self._open_stream = open_stream

    async def run(self, prompt: tuple[int, ...], max_tokens: int) -> RequestTiming:
        started = time.perf_counter()
        ttft = 0.0
        tokens = 0
        async for reply in self._open_stream(prompt, max_tokens):
            if tokens == 0 and reply.token_ids:
                ttft = time.perf_counter() - started
            tokens += len(reply.token_ids)
        return RequestTiming(ttft, tokens)


def worker_target(stub: worker_pb2_grpc.WorkerServiceStub) -> GrpcStreamTarget:
    def open_stream(prompt: tuple[int, ...], max_tokens: int) -> AsyncIterator[Any]:
        return stub.Generate(worker_pb2.WorkerServiceGenerateRequest(
            request_id=uuid.uuid4().hex, prompt_token_ids=prompt, max_tokens=max_tokens,
            sampling=common_pb2.SamplingParams(temperature=0.0, ignore_eos=True)))

    return GrpcStreamTarget("worker gRPC", open_stream)


def mesh_target(stub: scheduler_pb2_grpc.SchedulerServiceStub, model: str) -> GrpcStreamTarget:
    def open_stream(prompt: tuple[int, ...], max_tokens: int) -> AsyncIterator[Any]:
        return stub.Generate(scheduler_pb2.GenerateRequest(
            model=model, token_ids=common_pb2.TokenIds(ids=prompt), max_tokens=max_tokens,
            sampling=common_pb2.SamplingParams(temperature=0.0, ignore_eos=True)))

    return GrpcStreamTarget("mesh (scheduler -> worker)", open_stream)


@dataclass(frozen=True)
class RoundResult:
    target: str
    concurrency: int
    tokens_per_s: float
    mean_ttft_s: float
    p50_ttft_s: float
    frontend_cpu_ms: float
    """CPU time of this process per request: vLLM's front end plus whatever the target adds."""
    load_average: float
    """The machine's 1-minute load average when the round ended (other jobs share the cores)."""


@dataclass(frozen=True)
class EngineVariant:
    """One engine setting to compare: option overrides and environment variables, named by its spec."""

    name: str
    options: dict[str, Any]
    env: dict[str, str]


def parse_variant(spec: str, defaults: object) -> EngineVariant:
    """``"dtype=float32,VLLM_CPU_NUM_OF_RESERVED_CPU=0"`` -> options and env; values take the type of
    the field's default in ``defaults`` (a ``VllmEngineOptions``)."""
    options: dict[str, Any] = {}
    env: dict[str, str] = {}
    for item in filter(None, spec.split(",")) if spec != "default" else ():
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"variant item {item!r} must be key=value")
        if key.isupper():
            env[key] = value
        elif hasattr(defaults, key):
            options[key] = _typed_like(getattr(defaults, key), value)
        else:
            raise ValueError(f"variant key {key!r} is neither an engine option nor an environment variable")
    return EngineVariant(spec, options, env)


def _typed_like(default: object, value: str) -> object:
    if isinstance(default, bool):
        return value.lower() in ("1", "true", "yes")
    if isinstance(default, (int, float)):
        return type(default)(value)
    return value


def random_prompts(count: int, length: int, rng: random.Random, vocab: int = 49152) -> list[tuple[int, ...]]:
    """Distinct prompts of ``length`` token ids (no two share a first block, so no cache hits)."""
    return [tuple(rng.randrange(100, vocab) for _ in range(length)) for _ in range(count)]


async def run_round(
    target: Target, prompts: Sequence[tuple[int, ...]], max_tokens: int, concurrency: int
) -> RoundResult:
    """All ``prompts`` through ``target`` with at most ``concurrency`` in flight."""
    gate = asyncio.Semaphore(concurrency)

    async def one(prompt: tuple[int, ...]) -> RequestTiming:
        async with gate:
            return await target.run(prompt, max_tokens)

    started = time.perf_counter()
    # The engine core runs in its own process, so this process's CPU time is the front end's cost:
    # unlike wall time, it barely moves with the load other jobs put on the machine.
    cpu_started = time.process_time()
    timings = await asyncio.gather(*(one(p) for p in prompts))
    cpu_ms = (time.process_time() - cpu_started) * 1000 / len(prompts)
    elapsed = time.perf_counter() - started
    ttfts = [t.ttft_s for t in timings]
    return RoundResult(
        target.name, concurrency, sum(t.output_tokens for t in timings) / elapsed,
        statistics.fmean(ttfts), statistics.median(ttfts), cpu_ms, os.getloadavg()[0],
    )


async def compare(
    targets: Sequence[Target], concurrencies: Sequence[int], rounds: int,
    prompt_tokens: int, max_tokens: int, seed: int, min_requests: int = 8,
) -> list[RoundResult]:
    """Every target at every concurrency, ``rounds`` times, alternating which target goes first;
    a round sends ``max(min_requests, 2 * concurrency)`` requests."""
    rng = random.Random(seed)
    results: list[RoundResult] = []
    for concurrency in concurrencies:
        for round_index in range(rounds):
            order = targets if round_index % 2 == 0 else list(reversed(targets))
            for target in order:
                prompts = random_prompts(max(min_requests, 2 * concurrency), prompt_tokens, rng)
                result = await run_round(target, prompts, max_tokens, concurrency)
                print(f"c={concurrency} {target.name}: {result.tokens_per_s:.1f} tok/s, "
                      f"load average {result.load_average:.2f}", flush=True)
                results.append(result)
    return results


def summarize(
    results: Sequence[RoundResult], baseline: str,
    title: str = "Same engine, same workload: bare vLLM vs the engine layer, the worker service and the mesh",
) -> ResultTable:
    """Mean over rounds per target and concurrency, with ratios to ``baseline``."""
    table = ResultTable(
        ["concurrency", "target", "output tok/s", "throughput ratio", "mean TTFT ms", "p50 TTFT ms",
         "TTFT delta ms", "front-end CPU ms/request", "load average"],
        title=title,
    )
    for concurrency in sorted({r.concurrency for r in results}):
        by_target = _means(r for r in results if r.concurrency == concurrency)
        base = by_target[baseline]
        for name, (tps, ttft, p50, cpu_ms, load) in by_target.items():
            table.add(concurrency, name, tps, tps / base[0], ttft * 1000, p50 * 1000,
                      (ttft - base[1]) * 1000, cpu_ms, load)
    return table


def _means(results: Iterable[RoundResult]) -> dict[str, tuple[float, float, float, float, float]]:
    """Per target, means over rounds: throughput, mean TTFT, p50 TTFT, front-end CPU per request,
    load average."""
    grouped: dict[str, list[RoundResult]] = {}
    for result in results:
        grouped.setdefault(result.target, []).append(result)
    return {
        name: (
            statistics.fmean(r.tokens_per_s for r in rs),
            statistics.fmean(r.mean_ttft_s for r in rs),
            statistics.fmean(r.p50_ttft_s for r in rs),
            statistics.fmean(r.frontend_cpu_ms for r in rs),
            statistics.fmean(r.load_average for r in rs),
        )
        for name, rs in grouped.items()
    }


STEP_PARTS = ("schedule", "input preparation", "model forward", "logits", "sampling", "update from output",
              "output processing", "other")
"""Where a decode step's time goes, in the order the engine spends it (``--step-profile``)."""


class StepClock:
    """Accumulates the time of wrapped engine methods per step; keeps only pure decode steps, where
    every scheduled request computes exactly one token (prefill steps would blur the split)."""

    def __init__(self) -> None:
        self.current: dict[str, float] = {}
        self.decode_steps = 0
        self.decode_tokens = 0
        self.totals: dict[str, float] = dict.fromkeys(STEP_PARTS, 0.0)
        self.pure_decode = False
        self.scheduled = 0

    def wrap(self, owner: object, method: str, part: str) -> None:
        original = getattr(owner, method)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.current[part] = self.current.get(part, 0.0) + time.perf_counter() - started

        setattr(owner, method, timed)

    def note_schedule(self, output: Any) -> None:
        self.scheduled = len(output.num_scheduled_tokens)
        self.pure_decode = self.scheduled > 0 and output.total_num_scheduled_tokens == self.scheduled

    def end_step(self, total_s: float) -> None:
        if self.pure_decode:
            parts = dict(self.current)
            # execute_model contains the forward and (here) the logits: its own share is input preparation.
            parts["input preparation"] = parts.pop("execute model", 0.0) - parts.get("model forward", 0.0) \
                - parts.get("logits", 0.0)
            parts["other"] = total_s - sum(parts.values())
            for part, seconds in parts.items():
                self.totals[part] += seconds
            self.decode_steps += 1
            self.decode_tokens += self.scheduled
        self.current = {}
        self.pure_decode = False


def _instrument(engine: Any, clock: StepClock) -> None:
    """Wraps the in-process engine's step phases with ``clock``."""
    core = engine.engine_core.engine_core
    runner = core.model_executor.driver_worker.worker.model_runner
    schedule = core.scheduler.schedule

    def schedule_and_note(*args: Any, **kwargs: Any) -> Any:
        output = schedule(*args, **kwargs)
        clock.note_schedule(output)
        return output

    core.scheduler.schedule = schedule_and_note
    clock.wrap(core.scheduler, "schedule", "schedule")
    clock.wrap(core.model_executor, "execute_model", "execute model")
    clock.wrap(runner.model, "forward", "model forward")
    clock.wrap(runner.model, "compute_logits", "logits")
    clock.wrap(core.model_executor, "sample_tokens", "sampling")
    clock.wrap(core.scheduler, "update_from_output", "update from output")
    clock.wrap(engine.output_processor, "process_outputs", "output processing")


def _profile_steps(args: argparse.Namespace) -> int:
    """``--step-profile``: the first variant's engine in this process (no IPC), one decode step split
    into its phases at each concurrency; writes ``step_profile.md``."""
    import torch
    from forethought.backends.vllm.backend import (
        VllmEngineOptions,
        engine_args,
        start_environment,
    )
    from forethought.backends.vllm.cpu_dtype import resolve_dtype
    from forethought.models import resolve_model
    from vllm import SamplingParams as VllmSamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.v1.engine.llm_engine import LLMEngine

    base = VllmEngineOptions(model=args.model, kv_cache_gib=args.kv_cache_gib)
    variant = parse_variant(args.variant[0] if args.variant else "default", base)
    options = dataclasses.replace(base, **variant.options, executor="uni",
                                  engine_env={**base.engine_env, **variant.env})
    # This process is the profile's alone: its environment is the engine's.
    os.environ.update(start_environment(options, on_cpu=True, usable_cpus=len(os.sched_getaffinity(0))))
    # torch read OMP_NUM_THREADS when it loaded, before the line above could set it.
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads())))
    dtype = resolve_dtype(options.dtype, on_cpu=True)
    endpoint = f"ipc:///tmp/forethought-profile-{uuid.uuid4().hex[:8]}"
    engine = LLMEngine.from_engine_args(engine_args(options, resolve_model(args.model), dtype, endpoint))
    table = ResultTable(
        ["concurrency", "decode step ms", *(f"{part} ms" for part in STEP_PARTS), "decode tok/s",
         "load average"],
        title=f"One decode step of `{variant.name}` ({dtype}), in process, by phase",
    )
    rng = random.Random(args.seed)
    params = VllmSamplingParams(max_tokens=args.output_tokens, temperature=0.0, ignore_eos=True)
    for concurrency in args.concurrency:
        clock = StepClock()
        _instrument(engine, clock)
        for prompt in random_prompts(concurrency, args.prompt_tokens, rng):
            engine.add_request(uuid.uuid4().hex, TokensPrompt(prompt_token_ids=list(prompt)), params)
        while engine.has_unfinished_requests():
            started = time.perf_counter()
            engine.step()
            clock.end_step(time.perf_counter() - started)
        steps = max(clock.decode_steps, 1)
        step_ms = sum(clock.totals.values()) * 1000 / steps
        table.add(concurrency, step_ms, *(clock.totals[part] * 1000 / steps for part in STEP_PARTS),
                  clock.decode_tokens / max(sum(clock.totals.values()), 1e-9), os.getloadavg()[0])
        _uninstrument(engine)
    write_table(args.out / "step_profile.md", [table],
                preamble=f"`forethought bench worker-overhead {' '.join(_argv_echo(args))}`")
    return 0


def _uninstrument(engine: Any) -> None:
    """Drops the instance attributes ``_instrument`` set, so the class methods apply again."""
    core = engine.engine_core.engine_core
    runner = core.model_executor.driver_worker.worker.model_runner
    for owner, names in ((core.scheduler, ("schedule", "update_from_output")),
                         (core.model_executor, ("execute_model", "sample_tokens")),
                         (runner.model, ("forward", "compute_logits")),
                         (engine.output_processor, ("process_outputs",))):
        for name in names:
            vars(owner).pop(name, None)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forethought bench worker-overhead", description=__doc__)
    parser.add_argument("--model", default="SmolLM2-135M-Instruct")
    parser.add_argument("--concurrency", type=positive_int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--rounds", type=positive_int, default=2)
    parser.add_argument("--prompt-tokens", type=positive_int, default=128)
    parser.add_argument("--output-tokens", type=positive_int, default=32)
    parser.add_argument("--min-requests", type=positive_int, default=8,
                        help="requests per round at least (else twice the concurrency)")
    parser.add_argument("--kv-cache-gib", type=positive_number, default=1.0)
    parser.add_argument("--variant", nargs="+", default=[], metavar="SPEC",
                        help="compare these engine settings instead of the ways in (see above)")
    parser.add_argument("--step-profile", action="store_true",
                        help="split a decode step of the first variant's engine into its phases, in process")
    parser.add_argument("--seed", type=int, default=0)
    add_output_argument(parser, "worker_overhead")
    return parser


async def _run_overhead(args: argparse.Namespace) -> list[RoundResult]:
    """The four ways into one engine; writes ``results.md`` with the engine's start time."""
    from forethought.backends.vllm.backend import VllmEngineBackend, VllmEngineOptions
    from forethought.cluster.redis_server import start_redis
    from forethought.prewarm import ModelLifecycle
    from forethought.rpc.channels import open_channel
    from forethought.rpc.server import running_service
    from forethought.services.scheduler.shell import SERVICE as scheduler_service
    from forethought.services.scheduler.shell import Settings as SchedulerSettings
    from forethought.services.worker.shell import SERVICE as worker_service
    from forethought.services.worker.shell import Settings as WorkerSettings
    from forethought.services.worker.shell import WorkerShell

    options = VllmEngineOptions(model=args.model, kv_cache_gib=args.kv_cache_gib)
    lifecycle = ModelLifecycle(lambda model: VllmEngineBackend(options))
    redis = start_redis()
    common = {"port": 0, "redis_url": redis.url, "namespace": f"bench-{uuid.uuid4().hex[:8]}"}
    worker_settings = WorkerSettings(engine="vllm", model=args.model, worker_id="bench-worker", **common)
    try:
        await lifecycle.load(args.model)
        backend = lifecycle.engine(args.model)
        assert isinstance(backend, VllmEngineBackend)
        async with running_service(worker_service, worker_settings, WorkerShell(worker_settings, lifecycle)) as worker_address, \
                running_service(scheduler_service, SchedulerSettings(router="round_robin", policy="fcfs", **common)) as scheduler_address, \
                open_channel(worker_address) as worker_channel, open_channel(scheduler_address) as scheduler_channel:
            targets: list[Target] = [
                DirectVllmTarget(backend.engine), BackendTarget(backend),
                worker_target(worker_pb2_grpc.WorkerServiceStub(worker_channel)),
                mesh_target(scheduler_pb2_grpc.SchedulerServiceStub(scheduler_channel), args.model),
            ]
            results = await _warm_and_compare(targets, args)
            start_seconds = backend.start_seconds
            del targets, backend
    finally:
        await lifecycle.stop_all()
        redis.stop()
        # AsyncLLM sits in reference cycles; collect it now, not during interpreter teardown.
        gc.collect()
    engine_table = ResultTable(["engine start s", "single-stream output tok/s"], title="vLLM on this CPU")
    single = [r.tokens_per_s for r in results if r.concurrency == 1]
    engine_table.add(start_seconds, statistics.fmean(single) if single else None)
    write_table(args.out / "results.md", [summarize(results, DirectVllmTarget.name), engine_table],
                preamble=f"`forethought bench worker-overhead {' '.join(_argv_echo(args))}`")
    return results


async def _run_variants(args: argparse.Namespace) -> list[RoundResult]:
    """One engine per ``--variant``, all running, compared side by side; writes ``variants.md``."""
    from forethought.backends.vllm.backend import VllmEngineBackend, VllmEngineOptions

    base = VllmEngineOptions(model=args.model, kv_cache_gib=args.kv_cache_gib)
    variants = [parse_variant(spec, base) for spec in args.variant]
    backends: list[VllmEngineBackend] = []
    engine_table = ResultTable(["variant", "dtype", "engine start s"], title="Engines compared")
    try:
        # One at a time: each start sets its own environment for the processes it spawns.
        for variant in variants:
            options = dataclasses.replace(
                base, **variant.options, engine_env={**base.engine_env, **variant.env}
            )
            backend = VllmEngineBackend(options)
            await backend.start()
            backends.append(backend)
            engine_table.add(variant.name, backend.dtype, backend.start_seconds)
            print(f"started {variant.name} ({backend.dtype}) in {backend.start_seconds:.1f} s", flush=True)
        targets: list[Target] = [
            BackendTarget(backend, variant.name) for backend, variant in zip(backends, variants)
        ]
        results = await _warm_and_compare(targets, args)
        del targets
    finally:
        for backend in backends:
            await backend.stop()
        del backends
        gc.collect()
    write_table(
        args.out / "variants.md",
        [summarize(results, variants[0].name, "Engine settings side by side, through VllmEngineBackend"),
         engine_table],
        preamble=f"`forethought bench worker-overhead {' '.join(_argv_echo(args))}`",
    )
    return results


async def _warm_and_compare(targets: Sequence[Target], args: argparse.Namespace) -> list[RoundResult]:
    # One untimed request per target pays first-call costs (lazy loop tasks, kernels, channels).
    for target in targets:
        await target.run(tuple(range(200, 264)), 4)
    return await compare(targets, args.concurrency, args.rounds, args.prompt_tokens, args.output_tokens,
                         args.seed, args.min_requests)


async def _run(args: argparse.Namespace) -> int:
    results = await (_run_variants(args) if args.variant else _run_overhead(args))
    means = {c: _means(r for r in results if r.concurrency == c) for c in sorted(args.concurrency)}
    series = [
        LineSeries(name, list(means), [means[c][name][0] for c in means])
        for name in dict.fromkeys(r.target for r in results)
    ]
    plot = "variants_throughput.png" if args.variant else "throughput.png"
    line_plot(args.out / plot, series, "Output throughput", "concurrent requests", "tokens/s")
    return 0


def _argv_echo(args: argparse.Namespace) -> list[str]:
    echo = ["--concurrency", *map(str, args.concurrency), "--rounds", str(args.rounds),
            "--prompt-tokens", str(args.prompt_tokens), "--output-tokens", str(args.output_tokens)]
    if args.min_requests != 8:
        echo += ["--min-requests", str(args.min_requests)]
    if args.kv_cache_gib != 1.0:
        echo += ["--kv-cache-gib", str(args.kv_cache_gib)]
    if args.variant:
        echo += ["--variant", *(f"'{spec}'" for spec in args.variant)]
    if args.step_profile:
        echo.append("--step-profile")
    return echo


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.variant:  # a bad spec would otherwise stop the run with a traceback once vLLM is loaded
        from forethought.backends.vllm.backend import VllmEngineOptions

        base = VllmEngineOptions(model=args.model, kv_cache_gib=args.kv_cache_gib)
        for spec in args.variant:
            try:
                dataclasses.replace(base, **parse_variant(spec, base).options)
            except (ValueError, TypeError) as error:
                parser.error(f"argument --variant: {spec}: {error}")
    return _profile_steps(args) if args.step_profile else asyncio.run(_run(args))


if __name__ == "__main__":
    raise SystemExit(main())
