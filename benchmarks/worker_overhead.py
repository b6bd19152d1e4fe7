"""Benchmark ``worker-overhead``: what the worker and the mesh cost over bare vLLM (DESIGN.md, Engines).

One vLLM engine, one workload, four ways in, measured side by side in one run: vLLM's
``AsyncLLM.generate`` called directly; the same engine through ``VllmEngineBackend``; through the
worker's gRPC service; and through the whole mesh (scheduler -> worker, with Redis, the registry and
the prefix index). The worker and scheduler run in this process over the same engine, so the gRPC rows
carry their serialization and scheduling on the same cores. Every request has a distinct random prompt
so the prefix cache favours no target; rounds alternate the order of targets.

``forethought bench worker-overhead [--concurrency 1 4 16] [--rounds 2]``; goal: throughput within 5%
of bare vLLM, TTFT within 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from benchmarks.report import LineSeries, ResultTable, add_output_argument, line_plot, write_table
from forethought.cluster.redis_server import start_redis
from forethought.engine.backend import EngineBackend, GenerationRequest, SamplingParams
from forethought.prewarm import ModelLifecycle
from forethought.rpc.channels import open_channel
from forethought.rpc.server import running_service
from forethought.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc, worker_pb2, worker_pb2_grpc


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
        async for output in self._engine.generate(  # type: ignore[attr-defined]
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
        statistics.fmean(ttfts), statistics.median(ttfts), cpu_ms,
    )


async def compare(
    targets: Sequence[Target], concurrencies: Sequence[int], rounds: int,
    prompt_tokens: int, max_tokens: int, seed: int,
) -> list[RoundResult]:
    """Every target at every concurrency, ``rounds`` times, alternating which target goes first."""
    rng = random.Random(seed)
    results: list[RoundResult] = []
    for concurrency in concurrencies:
        for round_index in range(rounds):
            order = targets if round_index % 2 == 0 else list(reversed(targets))
            for target in order:
                prompts = random_prompts(max(8, 2 * concurrency), prompt_tokens, rng)
                results.append(await run_round(target, prompts, max_tokens, concurrency))
    return results


def summarize(results: Sequence[RoundResult], baseline: str) -> ResultTable:
    """Mean over rounds per target and concurrency, with ratios to ``baseline``."""
    table = ResultTable(
        ["concurrency", "target", "output tok/s", "throughput ratio", "mean TTFT ms", "p50 TTFT ms",
         "TTFT delta ms", "front-end CPU ms/request"],
        title="Same engine, same workload: bare vLLM vs the engine layer, the worker service and the mesh",
    )
    for concurrency in sorted({r.concurrency for r in results}):
        by_target = _means(r for r in results if r.concurrency == concurrency)
        base = by_target[baseline]
        for name, (tps, ttft, p50, cpu_ms) in by_target.items():
            table.add(concurrency, name, tps, tps / base[0], ttft * 1000, p50 * 1000,
                      (ttft - base[1]) * 1000, cpu_ms)
    return table


def _means(results: Iterable[RoundResult]) -> dict[str, tuple[float, float, float, float]]:
    """Per target, means over rounds: throughput, mean TTFT, p50 TTFT, front-end CPU per request."""
    grouped: dict[str, list[RoundResult]] = {}
    for result in results:
        grouped.setdefault(result.target, []).append(result)
    return {
        name: (
            statistics.fmean(r.tokens_per_s for r in rs),
            statistics.fmean(r.mean_ttft_s for r in rs),
            statistics.fmean(r.p50_ttft_s for r in rs),
            statistics.fmean(r.frontend_cpu_ms for r in rs),
        )
        for name, rs in grouped.items()
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forethought bench worker-overhead", description=__doc__)
    parser.add_argument("--model", default="SmolLM2-135M-Instruct")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--kv-cache-gib", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    add_output_argument(parser, "worker_overhead")
    return parser


async def _run(args: argparse.Namespace) -> int:
    from forethought.engine.vllm_backend import VllmEngineBackend, VllmEngineOptions
    from forethought.services.scheduler import Settings as SchedulerSettings
    from forethought.services.worker import Settings as WorkerSettings
    from forethought.services.worker import WorkerShell

    options = VllmEngineOptions(model=args.model, kv_cache_gib=args.kv_cache_gib)
    lifecycle = ModelLifecycle(lambda model: VllmEngineBackend(options))
    redis = start_redis()
    common = {"port": 0, "redis_url": redis.url, "namespace": f"bench-{uuid.uuid4().hex[:8]}"}
    worker_settings = WorkerSettings(engine="vllm", model=args.model, worker_id="bench-worker", **common)
    try:
        await lifecycle.load(args.model)
        backend = lifecycle.engine(args.model)
        assert isinstance(backend, VllmEngineBackend)
        async with running_service("worker", worker_settings, WorkerShell(worker_settings, lifecycle)) as worker_address, \
                running_service("scheduler", SchedulerSettings(router="round_robin", policy="fcfs", **common)) as scheduler_address, \
                open_channel(worker_address) as worker_channel, open_channel(scheduler_address) as scheduler_channel:
            targets: list[Target] = [
                DirectVllmTarget(backend.engine), BackendTarget(backend),
                worker_target(worker_pb2_grpc.WorkerServiceStub(worker_channel)),
                mesh_target(scheduler_pb2_grpc.SchedulerServiceStub(scheduler_channel), args.model),
            ]
            # One untimed request per target pays first-call costs (lazy loop tasks, kernels, channels).
            for target in targets:
                await target.run(tuple(range(200, 264)), 4)
            results = await compare(targets, args.concurrency, args.rounds, args.prompt_tokens, args.output_tokens, args.seed)
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
    means = {c: _means(r for r in results if r.concurrency == c) for c in sorted(args.concurrency)}
    series = [
        LineSeries(name, list(means), [means[c][name][0] for c in means])
        for name in sorted({r.target for r in results})
    ]
    line_plot(args.out / "throughput.png", series, "Output throughput", "concurrent requests", "tokens/s")
    return 0


def _argv_echo(args: argparse.Namespace) -> list[str]:
    return ["--concurrency", *map(str, args.concurrency), "--rounds", str(args.rounds),
            "--prompt-tokens", str(args.prompt_tokens), "--output-tokens", str(args.output_tokens)]


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(_run(_parser().parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
