"""SSJF against FCFS and oracle SJF on held-out ShareGPT requests (SSJF paper section 4.2, Figure 4).

Each request is a held-out ShareGPT turn with its true output length (SmolLM2 tokens) and the trained
proxy model's real forecast (written by training beside the model, ``heldout.jsonl``); arrivals follow the Azure LLM
conversation trace, compressed or stretched
to each offered load (a share of the mode's saturated FCFS throughput). Three serving modes as in the
paper, all with max batch size 4:

- no batching and dynamic batching: a server that takes up to ``max_batch`` requests from the global
  queue (waiting up to ``batch_wait_s`` for a batch to fill) and runs them as one static batch until the
  longest finishes (Figure 3); iteration times come from the cost model;
- continuous batching: the cluster simulator with one engine core (iteration-level batching, Orca).

The queue order is the shared ``forethought.queueing`` policy built by name: ``fcfs``, or ``ssjf`` keyed
by the forecast (SSJF), the forecast with aging (section 6), or the true length (oracle SJF); on CASTILLO
labels also by the mean of the pair's answers (pair-mean SJF: a perfect forecast from the prompt alone,
whose gap to the oracle is the answers' own spread, which no predictor can close).

    forethought bench ssjf [--model DIR] [--requests 1000] [--continuous-requests N] [--loads 0.6,0.8,0.95,1.2]
    forethought bench ssjf --castillo FILE [--model DIR] ...

``--castillo FILE`` takes the requests from CASTILLO-format labels instead: (prompt, model) pairs of the
validate prompts the model-aware predictor was not trained on, each request carrying its served model,
its true length one of the pair's answers drawn at random (capped at ``--max-output-tokens``) and its
forecast the predictor's for that model.

Loads are offered load as a share of FCFS capacity. The paper's throughput gains (2.2-3.6x) can only
arise when requests arrive faster than FCFS serves them, so its rates reach into overload; the summary
averages stable loads (< 1) and overloaded ones (>= 1) separately.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from forethought.arguments import (
    input_file,
    listed,
    non_negative_int,
    non_negative_number,
    or_empty,
    positive_int,
    positive_number,
)
from forethought.cache import CACHE_ROOT
from forethought.config import MissingPrerequisite
from forethought.costmodel import PROFILES, get_profile
from forethought.costmodel.profiles import CostProfile
from forethought.engine.core import EngineConfig
from forethought.queueing import GlobalQueue, QueuedRequest, build_policy
from forethought.sim.config import ClusterConfig, build_simulator
from forethought.workloads.azure import azure_arrivals, azure_trace_path
from forethought.workloads.workload import TokenSegment, TraceRequest, Workload

from benchmarks.report import (
    RESULTS_ROOT,
    LineSeries,
    ResultTable,
    add_output_argument,
    line_plot,
    progress,
    write_table,
)

BLOCK_SIZE = 16
MODES = ("no batching", "dynamic batching", "continuous batching")


@dataclass(frozen=True)
class Job:
    """One request: true and forecast output length (served-model tokens)."""

    request_id: str
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    forecast_tokens: float
    model: str = ""
    expected_tokens: float | None = None  # CASTILLO: the mean of the pair's answers (capped as the true length)


@dataclass(frozen=True)
class Scheduler:
    """A queue order, and which length it sorts by: the ``forecast``, the ``truth`` (oracle SJF), or the
    ``pair mean`` (the mean of the prompt's answers: the best a forecast from the prompt alone can know)."""

    label: str
    policy: str
    sort_by: str = "forecast"
    aging_rate: float = 0.0

    def key_tokens(self, job: Job) -> float:
        if self.sort_by == "truth":
            return float(job.output_tokens)
        if self.sort_by == "pair mean":
            assert job.expected_tokens is not None  # NOTE: only CASTILLO jobs get this scheduler
            return job.expected_tokens
        return job.forecast_tokens


def static_batch_duration_s(profile: CostProfile, jobs: Sequence[Job]) -> float:
    """Prefill every prompt at once, then decode until the longest output ends; finished requests keep
    their slot (static batching, SSJF Figure 3)."""
    prompts = sum(job.prompt_tokens for job in jobs)
    duration = profile.prefill_time(prompts)
    for step in range(1, max(job.output_tokens for job in jobs)):
        duration += profile.decode_time(len(jobs), prompts + step * len(jobs))
    return duration


def serve_static_batches(
    jobs: Sequence[Job], scheduler: Scheduler, max_batch: int, batch_wait_s: float,
    duration_s: Callable[[Sequence[Job]], float],
) -> dict[str, float]:
    """Finish time of each job on one server running static batches in queue order (pure)."""
    queue = GlobalQueue(build_policy(scheduler.policy, aging_rate=scheduler.aging_rate))
    by_id = {job.request_id: job for job in jobs}
    pending = sorted(jobs, key=lambda job: job.arrival_s)
    finish: dict[str, float] = {}
    now, next_arrival = 0.0, 0
    while len(finish) < len(jobs):
        if not len(queue):
            now = max(now, pending[next_arrival].arrival_s)
        next_arrival = _enqueue_until(queue, pending, next_arrival, now, scheduler)
        oldest = min(request.arrival_s for request in queue.ordered(now))
        fill_deadline = max(now, oldest + batch_wait_s)
        while len(queue) < max_batch and next_arrival < len(pending) and pending[next_arrival].arrival_s <= fill_deadline:
            now = max(now, pending[next_arrival].arrival_s)
            next_arrival = _enqueue_until(queue, pending, next_arrival, now, scheduler)
        if len(queue) < max_batch:
            now = fill_deadline if next_arrival < len(pending) else now
        batch = [by_id[queue.pop(now).request_id] for _ in range(min(max_batch, len(queue)))]
        now += duration_s(batch)
        finish.update((job.request_id, now) for job in batch)
    return finish


def _enqueue_until(queue: GlobalQueue, pending: Sequence[Job], index: int, now: float, scheduler: Scheduler) -> int:
    while index < len(pending) and pending[index].arrival_s <= now:
        job = pending[index]
        queue.push(QueuedRequest(job.request_id, job.arrival_s, job.prompt_tokens, scheduler.key_tokens(job)), job.arrival_s)
        index += 1
    return index


def serve_continuous(jobs: Sequence[Job], scheduler: Scheduler, profile: str, max_batch: int) -> dict[str, float]:
    """Finish times from the cluster simulator: one engine, iteration-level batching of ``max_batch``."""
    requests = tuple(
        TraceRequest(job.request_id, job.arrival_s, (TokenSegment("sharegpt-test", index, job.prompt_tokens),), job.output_tokens)
        for index, job in enumerate(jobs)
    )
    keys = {job.request_id: scheduler.key_tokens(job) for job in jobs}
    # KV room for the batch plus the admitted request; the engine's cost per step grows with its block count
    longest = max(job.prompt_tokens + job.output_tokens for job in jobs)
    blocks = (max_batch + 1) * (longest // BLOCK_SIZE + 2)
    config = ClusterConfig(
        profile=profile,
        engine=EngineConfig(num_blocks=blocks, block_size=BLOCK_SIZE, policy="fcfs", max_batch_size=max_batch,
                            initial_batch_size=max_batch),
        use_profile_capacity=False,
        queue_policy=scheduler.policy,
        queue_options={"aging_rate": scheduler.aging_rate},
        max_waiting_per_engine=1,  # the global queue, not the engine, decides the order
    )
    result = build_simulator(Workload(requests=requests), config, lambda request: keys[request.request_id]).run()
    return {record.request_id: record.finish_s for record in result.records}


def mode_finish_times(mode: str, jobs: Sequence[Job], scheduler: Scheduler, args: argparse.Namespace) -> dict[str, float]:
    if mode == "continuous batching":
        return serve_continuous(jobs, scheduler, args.profile, args.max_batch)
    profile = get_profile(args.profile)
    max_batch = 1 if mode == "no batching" else args.max_batch
    wait = 0.0 if mode == "no batching" else args.batch_wait_s
    return serve_static_batches(jobs, scheduler, max_batch, wait, lambda batch: static_batch_duration_s(profile, batch))


def jct_summary(jobs: Sequence[Job], finish: dict[str, float]) -> tuple[float, float]:
    """Mean and p99 job completion time."""
    jct = np.asarray([finish[job.request_id] - job.arrival_s for job in jobs])
    return float(jct.mean()), float(np.percentile(jct, 99))


SCORING_BATCH = 64


def at_arrivals(jobs: Sequence[Job], arrivals_s: np.ndarray) -> list[Job]:
    return [replace(job, arrival_s=float(t)) for job, t in zip(jobs, arrivals_s)]


def saturated_throughput(mode: str, jobs: Sequence[Job], args: argparse.Namespace) -> float:
    """Requests per second under FCFS when every request is already waiting (the mode's capacity)."""
    finish = mode_finish_times(mode, at_arrivals(jobs, np.zeros(len(jobs))), Scheduler("FCFS", "fcfs"), args)
    return len(jobs) / max(finish.values())


def load_jobs(model_dir: Path, count: int, seed: int) -> list[Job]:
    """Held-out ShareGPT requests with the model's forecasts (``heldout_forecasts``)."""
    path = heldout_forecasts(model_dir)
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    order = np.random.default_rng(seed).permutation(len(records))[:count]
    return [
        Job(f"req-{index}", 0.0, int(records[row]["prompt_tokens"]), int(records[row]["output_tokens"]),
            float(records[row]["forecast_tokens"]))
        for index, row in enumerate(order)
    ]


def castillo_jobs(model_dir: Path, path: Path, count: int, seed: int, max_output_tokens: int) -> list[Job]:
    """Requests from the CASTILLO pairs the model-aware predictor at ``model_dir`` did not train on, with
    its forecasts for each pair's model (prompts embedded once, cached)."""
    from forethought.predict.artifact import Forecaster
    from forethought.predict.castillo import load_pairs
    from forethought.predict.evaluate import pair_forecasts, scored_pairs

    forecaster = Forecaster.load(model_dir)
    if not forecaster.config.models:
        raise MissingPrerequisite(f"--model: {model_dir} knows no served model: `forethought train-predictor --castillo FILE` trains one")
    rng = np.random.default_rng(seed)
    candidates = scored_pairs(forecaster, load_pairs(path, ["validate"]))
    pairs = [candidates[row] for row in rng.permutation(len(candidates))[:count]]
    forecasts, _ = pair_forecasts(forecaster, pairs, progress=True)
    return [
        Job(f"req-{index}", 0.0, max(pair.input_tokens, 1), min(int(rng.choice(pair.output_sizes)), max_output_tokens),
            float(forecast), pair.model, float(np.minimum(pair.output_sizes, max_output_tokens).mean()))
        for index, (pair, forecast) in enumerate(zip(pairs, forecasts))
    ]


def heldout_forecasts(model_dir: Path) -> Path:
    """The predictor's forecasts of its held-out test split: written by training, or for a predictor
    trained without them (the shipped one) made here once, with a progress bar, and cached."""
    from forethought.predict.train import HELDOUT_FILE

    written = Path(model_dir) / HELDOUT_FILE
    if written.exists():
        return written
    # the config's digest too (it holds the training metrics): a retrained artifact keeps its name and version
    digest = hashlib.blake2b((Path(model_dir) / "config.json").read_bytes(), digest_size=6).hexdigest()
    cached = CACHE_ROOT / "bench" / "ssjf" / f"{Path(model_dir).name}-v{artifact_version(model_dir)}-{digest}-{HELDOUT_FILE}"
    if not cached.exists():
        score_heldout(Path(model_dir), cached)
    return cached


def score_heldout(model_dir: Path, path: Path) -> None:
    """Forecasts the test split the predictor was trained beside, in batches, into ``path`` (atomically)."""
    from forethought.predict.artifact import Forecaster
    from forethought.predict.train import TrainConfig, sample_splits, write_heldout

    training = json.loads((model_dir / "config.json").read_text())["training"]
    config = TrainConfig(**{name: value for name, value in training.items() if name in TrainConfig.__dataclass_fields__})
    test = sample_splits(config, None, progress=True)["test"]
    forecaster = Forecaster.load(model_dir)
    batches = [test[start:start + SCORING_BATCH] for start in range(0, len(test), SCORING_BATCH)]
    forecasts = [forecast for batch in progress(batches, "forecasting held-out requests")
                 for forecast in forecaster.forecast([s.prompt for s in batch], [s.history for s in batch])]
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_suffix(".partial")
    write_heldout(staging, test, forecasts)
    staging.replace(path)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from forethought.predict.shipped import predictor_folder

    parser = argparse.ArgumentParser(prog="forethought bench ssjf", description="SSJF vs FCFS vs oracle SJF")
    parser.add_argument("--model", type=predictor_folder, default=None,
                        help="predictor artifact folder (default: the fine-tuned one if trained, else the shipped one)")
    parser.add_argument("--requests", type=positive_int, default=1000)
    parser.add_argument("--continuous-requests", type=non_negative_int, default=0,
                        help="requests replayed in the continuous-batching simulator (0: all of --requests, as the other modes)")
    parser.add_argument("--loads", type=listed(positive_number), default=[0.6, 0.8, 0.95, 1.2],
                        help="offered loads, share of FCFS capacity, comma-separated")
    parser.add_argument("--profile", default="llama-7b-a100", choices=sorted(PROFILES), help="cost-model profile of the served model")
    parser.add_argument("--max-batch", type=positive_int, default=4, help="the paper's max batch size")
    parser.add_argument("--batch-wait-s", type=non_negative_number, default=0.1, help="dynamic batching wait timeout (0: no wait)")
    parser.add_argument("--aging-rate", type=non_negative_number, default=5.0,
                        help="tokens of priority gained per second waited (0: SSJF+aging is SSJF)")
    parser.add_argument("--data-dir", type=Path, default=None, help="shared data dir (default ../shared/data)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise-sigmas", type=or_empty(listed(positive_number)),
                        default=[0.25, 0.5, 1.0, 2.0],
                        help="log-normal noise on the true length for the ranking-quality sweep, comma-separated (empty: skip)")
    parser.add_argument("--sweep-loads", type=listed(positive_number), default=[0.95, 1.2],
                        help="offered loads of the ranking-quality sweep, comma-separated")
    parser.add_argument("--castillo", type=input_file, default=None,
                        help="requests from this CASTILLO-format file's validate pairs, forecast for their model (a model-aware --model)")
    parser.add_argument("--max-output-tokens", type=positive_int, default=2048, help="--castillo: cap on a request's true length")
    add_output_argument(parser, "ssjf")
    args = parser.parse_args(argv)
    if args.castillo is not None and args.out == RESULTS_ROOT / "ssjf":
        args.out = RESULTS_ROOT / "ssjf" / "castillo"
    return args


def main(argv: list[str] | None = None) -> int:
    from forethought.predict.artifact import UnreadableArtifact
    from forethought.predict.shipped import resolve_predictor

    args = parse_args(argv)
    trace = azure_trace_path("conv", args.data_dir)
    if not trace.is_file():  # read after the forecasts, which may take minutes: missing, it stops the run now
        raise FileNotFoundError(errno.ENOENT, "no such file", str(trace))
    try:
        args.model = resolve_predictor(args.model).directory
    except ValueError as error:
        raise MissingPrerequisite(f"--model: {error}") from error
    try:
        if args.castillo is not None:
            jobs = castillo_jobs(args.model, args.castillo, args.requests, args.seed, args.max_output_tokens)
        else:
            jobs = load_jobs(args.model, args.requests, args.seed)
    except UnreadableArtifact as error:
        raise MissingPrerequisite(f"--model: {error}") from error
    base_arrivals = azure_arrivals("conv", len(jobs), 1.0, args.data_dir)  # 1 request/s: each load divides it
    loads = args.loads
    schedulers = [
        Scheduler("FCFS", "fcfs"),
        Scheduler("SSJF", "ssjf"),
        Scheduler("SSJF+aging", "ssjf", aging_rate=args.aging_rate),
        Scheduler("oracle SJF", "ssjf", sort_by="truth"),
    ]
    # With the pair's answers known (CASTILLO), the ceiling of any forecast from the prompt: SJF by their mean.
    ceiling = all(job.expected_tokens is not None for job in jobs)
    if ceiling:
        schedulers.append(Scheduler("pair-mean SJF", "ssjf", sort_by="pair mean"))
    ceiling_column = ["pair-mean / oracle"] if ceiling else []
    table = ResultTable(
        ["mode", "load", "rate (req/s)", *(f"{s.label} mean JCT (s)" for s in schedulers),
         "SSJF vs FCFS", "SSJF / oracle", *ceiling_column, "p99 FCFS", "p99 SSJF", "p99 SSJF+aging"],
        title="Mean job completion time",
    )
    summary = ResultTable(["mode", "loads", "SSJF JCT reduction", "oracle JCT reduction", "SSJF / oracle",
                           *ceiling_column], title="Averaged over loads")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = [(mode, load) for mode in MODES for load in loads]
    replayed = {mode: jobs[: args.continuous_requests or None] if mode == "continuous batching" else jobs for mode in MODES}
    capacity = {mode: saturated_throughput(mode, replayed[mode], args) for mode in MODES}
    results: dict[tuple[str, float], list[tuple[float, float]]] = {}
    for mode, load in progress(runs, "replaying", total=len(runs)):
        rate = load * capacity[mode]
        placed = at_arrivals(replayed[mode], base_arrivals[: len(replayed[mode])] / rate)
        results[(mode, load)] = [jct_summary(placed, mode_finish_times(mode, placed, s, args)) for s in schedulers]
        means = [mean for mean, _ in results[(mode, load)]]
        p99 = [tail for _, tail in results[(mode, load)]]
        table.add(mode, load, rate, *means, f"{1 - means[1] / means[0]:.1%}", means[1] / means[3],
                  *([means[4] / means[3]] if ceiling else []), p99[0], p99[1], p99[2])
    for mode in MODES:
        means = np.asarray([[mean for mean, _ in results[(mode, load)]] for load in loads])
        for regime, chosen in (("< 1", [load < 1 for load in loads]), (">= 1", [load >= 1 for load in loads])):
            if any(chosen):
                picked = means[np.asarray(chosen)]
                summary.add(mode, regime, f"{np.mean(1 - picked[:, 1] / picked[:, 0]):.1%}",
                            f"{np.mean(1 - picked[:, 3] / picked[:, 0]):.1%}", float(np.mean(picked[:, 1] / picked[:, 3])),
                            *([float(np.mean(picked[:, 4] / picked[:, 3]))] if ceiling else []))
        series = [LineSeries(s.label, loads, means[:, i].tolist()) for i, s in enumerate(schedulers)]
        line_plot(out / f"jct_{mode.replace(' ', '_')}.png", series, f"Mean JCT, {mode}",
                  "offered load (share of FCFS capacity)", "mean JCT (s)")
    source = (f"CASTILLO validate (prompt, model) requests of {len(set(job.model for job in jobs))} models, one answer each "
              f"(capped at {args.max_output_tokens} tokens)" if args.castillo is not None else "held-out ShareGPT requests")
    preamble = (
        f"{len(jobs)} {source} ({len(replayed['continuous batching'])} of them in continuous batching), "
        f"forecasts from `{args.model.name}` (v{artifact_version(args.model)}), "
        f"Azure conv arrivals, profile `{args.profile}`, max batch {args.max_batch}, batch wait {args.batch_wait_s} s, "
        f"aging {args.aging_rate} tokens/s."
    )
    sweep = noise_sweep(jobs, base_arrivals, capacity, args.sweep_loads, args)
    write_table(out / "table.md", [summary, table, *sweep], preamble)
    return 0


def with_noisy_forecasts(jobs: Sequence[Job], sigma: float, rng: np.random.Generator) -> list[Job]:
    """Forecasts = true length x log-normal noise: a predictor of a chosen ranking quality."""
    noise = np.exp(rng.normal(0.0, sigma, len(jobs)))
    return [replace(job, forecast_tokens=job.output_tokens * float(k)) for job, k in zip(jobs, noise)]


def kendall_tau(jobs: Sequence[Job]) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau([j.output_tokens for j in jobs], [j.forecast_tokens for j in jobs]).statistic)


def noise_sweep(
    jobs: Sequence[Job], base_arrivals: np.ndarray, capacity: dict[str, float], loads: Sequence[float], args: argparse.Namespace
) -> list[ResultTable]:
    """SSJF's JCT reduction against the forecasts' Kendall tau in every mode: how good a ranking the aims
    need, separating the predictor's share of the gap from the set-up's. Beside this predictor: the
    pair mean of the answers (CASTILLO), the truth with log-normal noise, and the truth (oracle SJF)."""
    sigmas = args.noise_sigmas
    if not sigmas:
        return []
    rng = np.random.default_rng(args.seed)
    predictors = [("this predictor", list(jobs))]
    if all(job.expected_tokens is not None for job in jobs):
        predictors.append(("pair mean of the answers", [replace(job, forecast_tokens=job.expected_tokens) for job in jobs]))
    predictors += [(f"truth x lognormal({sigma})", with_noisy_forecasts(jobs, sigma, rng)) for sigma in sigmas]
    predictors.append(("truth (oracle SJF)", [replace(job, forecast_tokens=float(job.output_tokens)) for job in jobs]))
    table = ResultTable(["forecasts", "Kendall tau", *(f"{mode}, load {load}" for mode in MODES for load in loads)],
                        title="SSJF JCT reduction vs FCFS by forecast quality")

    def placed(forecast_jobs: Sequence[Job], mode: str, load: float) -> list[Job]:
        replayed = forecast_jobs[: args.continuous_requests or None] if mode == "continuous batching" else forecast_jobs
        return at_arrivals(replayed, base_arrivals[: len(replayed)] / (load * capacity[mode]))

    runs = [(mode, load) for mode in MODES for load in loads]
    fcfs_scheduler = Scheduler("FCFS", "fcfs")
    fcfs = {(mode, load): jct_summary(placed(jobs, mode, load), mode_finish_times(mode, placed(jobs, mode, load), fcfs_scheduler, args))[0]
            for mode, load in runs}
    cells = {}
    for name, forecast_jobs in progress(predictors, "ranking-quality sweep", total=len(predictors)):
        for mode, load in runs:
            jobs_at = placed(forecast_jobs, mode, load)
            mean = jct_summary(jobs_at, mode_finish_times(mode, jobs_at, Scheduler("SSJF", "ssjf"), args))[0]
            cells[(name, mode, load)] = f"{1 - mean / fcfs[(mode, load)]:.1%}"
        table.add(name, kendall_tau(forecast_jobs), *(cells[(name, mode, load)] for mode, load in runs))
    return [table]


def artifact_version(model_dir: Path) -> int:
    return int(json.loads((model_dir / "config.json").read_text())["version"])


if __name__ == "__main__":
    raise SystemExit(main())
