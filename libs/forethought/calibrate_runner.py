"""``forethought calibrate``: profiles a real vLLM engine, fits SamuLLM's latency model (Eq. 1, 2, 5) and
saves it as a named profile that ``forethought plan --profile``, the planner and the benchmarks load.

The engine is the project's ``VllmEngineBackend`` (SmolLM2 on this machine's CPU, the same path on a GPU
host). The probes and the fit are ``forethought.planner.calibration``'s; this module only times them: a
prefill probe from submission to its last request's end, a decode probe by the gaps between one request's
output tokens, a held-out batch end to end. docs/costmodel.md, "Calibrated profiles".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import random
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import psutil
from tqdm import tqdm

from forethought.arguments import non_negative_int, output_file, positive_int, positive_number
from forethought.domain import GenerationRequest, SamplingParams
from forethought.engine.executor import BatchShape
from forethought.planner.calibration import (
    PROFILES_DIR,
    TINY_GRID,
    CalibratedProfile,
    CalibrationGrid,
    DecodeProbe,
    HeldOutCase,
    PrefillProbe,
    decode_rows,
    fit_calibration,
    mean_wall_error,
    prefill_rows,
    profile_path,
    save_profile,
)
from forethought.planner.job_file import MODEL_SHAPES
from forethought.planner.plans import ModelNode

VOCABULARY = 49_152
"""SmolLM2's vocabulary; prompts draw ids below it (and above the special tokens)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forethought calibrate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="", help="profile name (default: <spec>-vllm-<cpu|gpu>, lower case)")
    parser.add_argument("--out", type=output_file, default=None,
                        help=f"write the profile here (default: {PROFILES_DIR}/NAME.json; missing folders are made)")
    parser.add_argument("--model", default="SmolLM2-135M-Instruct", help="the engine's model (a known name or a folder)")
    parser.add_argument("--spec", default="SmolLM2-135M", choices=sorted(MODEL_SHAPES),
                        help="the model's shape, for Eq. 1/2's FLOPs")
    parser.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel degree to start the engine with (a GPU host)")
    parser.add_argument("--max-model-len", type=positive_int, default=2048)
    parser.add_argument("--kv-cache-gib", type=positive_number, default=1.0)
    parser.add_argument("--tiny", action="store_true", help="a grid of a few probes (seconds; for tests)")
    parser.add_argument("--repeats", type=non_negative_int, default=0,
                        help="runs of each prefill and decode probe (0, the default: the grid's)")
    parser.add_argument("--seed", type=int, default=0, help="draws the prompts' token ids and the probes' order")
    parser.add_argument("--clock", choices=("wall", "engine-cpu"), default="",
                        help="what a measured second is (default: engine-cpu on a CPU, whose wall time on shared cores "
                             "counts the other processes' use; wall on a GPU)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    grid = TINY_GRID if args.tiny else CalibrationGrid()
    if args.repeats:
        grid = CalibrationGrid(grid.prefill_batches, grid.prompt_lengths, grid.decode_batches, grid.decode_contexts,
                               grid.decode_steps, args.repeats, grid.heldout, grid.prefill_budget)
    spec, hidden = MODEL_SHAPES[args.spec]
    model = ModelNode(args.spec, spec, hidden, args.max_model_len)
    command = "forethought calibrate " + shlex.join(list(sys.argv[1:] if argv is None else argv))
    profile = asyncio.run(calibrate(args, grid, model, command))
    name = profile.name
    path = save_profile(profile, args.out or profile_path(name))
    print(report(profile))
    print(f"saved profile {name!r} to {path} (load it with --profile {name if args.out is None else path})")
    return 0


async def calibrate(args: argparse.Namespace, grid: CalibrationGrid, model: ModelNode, command: str) -> CalibratedProfile:
    from vllm import __version__ as vllm_version
    from vllm.platforms import current_platform

    from forethought.backends.vllm.backend import VllmEngineBackend, VllmEngineOptions

    backend = VllmEngineBackend(VllmEngineOptions(
        model=args.model, max_model_len=args.max_model_len, kv_cache_gib=args.kv_cache_gib, tensor_parallel_size=args.tp))
    print(f"starting vLLM {vllm_version} with {args.model} ...", file=sys.stderr, flush=True)
    load_before = os.getloadavg()[0]
    await backend.start()
    device = "cpu" if current_platform.is_cpu() else "gpu"
    clock = args.clock or ("engine-cpu" if device == "cpu" else "wall")
    name = args.name or f"{args.spec.lower()}-vllm-{device}"
    meter = _Meter(clock)
    prompts = _Prompts(random.Random(args.seed))
    probes: list[PrefillProbe | DecodeProbe] = [*grid.prefill_probes(), *grid.decode_probes()]
    random.Random(args.seed).shuffle(probes)  # the machine's load drifts: spread it over every batch size
    try:
        await _run(backend, prompts, meter, [HeldOutCase(1, 16, 4)])  # the first requests pay one-off set-up
        rows: list[tuple[BatchShape, float]] = []
        for probe in tqdm(probes, desc="profiling", unit="probe"):
            if isinstance(probe, PrefillProbe):
                case = HeldOutCase(probe.batch, probe.prompt_tokens, 1)
                rows.extend(prefill_rows(probe, [(await _run(backend, prompts, meter, [case]))[0]
                                                 for _ in range(grid.repeats)]))
            else:
                rows.extend(decode_rows(probe, [await _decode_step(backend, prompts, meter, probe)
                                                for _ in range(grid.repeats)]))
        heldout = []
        for case in tqdm(grid.heldout, desc="held-out batches", unit="batch"):
            measured, wall = await _run(backend, prompts, meter, [case])
            heldout.append((case, measured, wall))
    finally:
        await backend.stop()
    engine = (f"vLLM {vllm_version} {args.model} ({backend.dtype}) on {device} "
              f"({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs), tp {args.tp}; "
              f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    return fit_calibration(name, model, args.tp, engine, rows, heldout, backend.start_seconds, command, clock)


class _Meter:
    """Reads the profile's clock: wall seconds, or the CPU seconds of the engine's processes (this
    process's children: vLLM's engine core and its helpers)."""

    def __init__(self, clock: str) -> None:
        self.clock = clock
        self._engine = psutil.Process().children(recursive=True) if clock == "engine-cpu" else []

    def read(self) -> float:
        if self.clock == "wall":
            return time.perf_counter()
        total = 0.0
        for process in self._engine:
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                total += times.user + times.system
        return total


class _Prompts:
    """Fresh random token ids per prompt, so no prompt hits the engine's prefix cache."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._count = 0

    def request(self, prompt_tokens: int, output_tokens: int) -> GenerationRequest:
        self._count += 1
        ids = tuple(self._rng.randrange(100, VOCABULARY) for _ in range(prompt_tokens))
        return GenerationRequest(f"calibrate-{self._count}", ids, output_tokens,
                                 sampling=SamplingParams(temperature=0.0, ignore_eos=True))


async def _drain(backend: Any, request: GenerationRequest, on_token: Callable[[int], None] | None = None) -> None:
    produced = 0
    async for chunk in backend.generate(request):
        produced += len(chunk.token_ids)
        if on_token is not None and chunk.token_ids:
            on_token(produced)


async def _run(backend: Any, prompts: _Prompts, meter: _Meter, cases: list[HeldOutCase]) -> tuple[float, float]:
    """The meter's seconds and the wall seconds from submitting the cases' requests together to the last end."""
    requests = [prompts.request(case.prompt_tokens, case.output_tokens) for case in cases for _ in range(case.batch)]
    started, wall = meter.read(), time.perf_counter()
    await asyncio.gather(*(_drain(backend, request) for request in requests))
    return meter.read() - started, time.perf_counter() - wall


async def _decode_step(backend: Any, prompts: _Prompts, meter: _Meter, probe: DecodeProbe) -> float:
    """The mean decode iteration of the batch: the meter from the moment every request has its first token
    (all prompts prefilled: the engine may take them in more than one iteration) to the first request's
    last token, over the first request's steps between."""
    requests = [prompts.request(probe.context_tokens, probe.steps + 1) for _ in range(probe.batch)]
    started: set[int] = set()
    window: dict[str, tuple[float, int]] = {}
    first_produced = 0

    def on_token(index: int) -> Callable[[int], None]:
        def seen(produced: int) -> None:
            nonlocal first_produced
            if index == 0:
                first_produced = produced
            started.add(index)
            if len(started) == probe.batch and "start" not in window:
                window["start"] = (meter.read(), first_produced)
            if index == 0 and produced == probe.steps + 1:
                window["end"] = (meter.read(), produced)
        return seen

    await asyncio.gather(*(_drain(backend, request, on_token(index)) for index, request in enumerate(requests)))
    (begin, from_token), (end, to_token) = window["start"], window["end"]
    if to_token - from_token < 2:
        raise RuntimeError(f"a decode probe of {probe.batch} x {probe.context_tokens} tokens left fewer than two "
                           f"decode steps after its prefills; raise decode_steps above {probe.steps}")
    return (end - begin) / (to_token - from_token)


def report(profile: CalibratedProfile) -> str:
    """The held-out batches' measured and predicted times, and the mean error."""
    lines = [f"profile {profile.name}: {profile.engine}; {profile.rows} probes fitted; "
             f"engine start {profile.load_s:.1f} s; clock {profile.clock}",
             f"{'batch':>5} {'prompt':>6} {'output':>6} {'measured_s':>10} {'predicted_s':>11} {'error':>6} {'wall_s':>7}"]
    for result in profile.heldout:
        case = result.case
        lines.append(f"{case.batch:>5} {case.prompt_tokens:>6} {case.output_tokens:>6} {result.measured_s:>10.3f} "
                     f"{result.predicted_s:>11.3f} {result.error:>6.1%} {result.wall_s:>7.3f}")
    if profile.heldout:
        lines.append(f"mean error on held-out batches: {profile.mean_error:.1%} ({profile.clock}); "
                     f"against their wall times {mean_wall_error(profile.heldout):.1%}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
