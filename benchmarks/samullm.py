"""SamuLLM against the Max- and Min-heuristics on a simulated 8-GPU node (SamuLLM section 5, Figures 7, 8, 11).

Three of the paper's applications on 8 A100-80GB devices, with published-size model shapes and the roofline
cost profiles (docs/costmodel.md) and the assumed load-time formula (docs/planner.md):

- ensembling (5.1): four models (two 13B, two 7B shapes) answer the same prompts, outputs capped at 256;
- routing (5.2): five models (70B, 46.7B, 34B, 13B, 7B shapes, as ROUTERBENCH's open models) each answer
  the prompts routed to it, in skewed shares, outputs capped at 512;
- chain summary (5.3): a 13B summariser walks documents of skewed chunk counts (median 3) chunk by chunk,
  a 70B evaluator judges each final summary twice, summaries capped at 900.

Prompts and true output lengths are CASTILLO's (``/work/shared/data/castillo``, the validate split): each
request is a real prompt and one of the answers a similar-sized open model gave it. The planner samples
lengths from each model's eCDF built on the train split (its "sampled" rows), or is told the truth
(``true``, the paper's output-length-known variant). Every plan is then executed, in simulation, on the
true lengths with the paper's dynamic stage adjustment (``forethought.planner.replay``, the state machine
the planner service runs jobs with), so a method is judged on what its plan takes, not on its own estimate.
End-to-end time is the search's CPU seconds plus the executed inference time (the paper's metric; CPU
seconds because the search's wall time on shared cores counts other processes).

    forethought bench samullm [--quick] [--out DIR] [--data-dir DIR] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from forethought.config import MissingPrerequisite
from forethought.costmodel import ModelSpec
from forethought.costmodel.registry import A100_80GB, LLAMA_7B, LLAMA_13B, LLAMA_70B
from forethought.planner import (
    ApplicationPlan,
    CostModel,
    DevicePool,
    Job,
    ModelNode,
    OutputLengthCDF,
    chain_summary_job,
    ensembling_job,
    heuristic_plan,
    realise,
    routing_job,
    samullm_plan,
)
from forethought.planner.lengths import CastilloAnswers, castillo_path, load_castillo, read_castillo_answers
from forethought.planner.replay import execute_plan

from benchmarks.report import ResultTable, add_output_argument, progress, write_table

NODE = DevicePool(A100_80GB, 8)
MIXTRAL = ModelSpec("Mixtral-8x7B", params=46.7e9, layers=32, kv_heads=8, head_dim=128)
"""Counted dense (every expert's FLOPs): the cost profiles have no mixture-of-experts term."""
CODELLAMA_34B = ModelSpec("CodeLlama-34B", params=33.7e9, layers=48, kv_heads=8, head_dim=128)
AIM = 1.2
CHUNK_TOKENS = 2048


@dataclass(frozen=True)
class Member:
    """A job's model: its node and the CASTILLO model whose answers stand for its outputs."""

    node: ModelNode
    castillo: str


def member(name: str, spec: ModelSpec, hidden: int, castillo: str, limit: int) -> Member:
    return Member(ModelNode(name, spec, hidden, 4096, limit), castillo)


def ensemble_members(count: int) -> list[Member]:
    """LLM-Blender's models (section 5.1) by size: 13B and 7B shapes, CASTILLO answers of similar models."""
    found = [
        member("vicuna-13b", LLAMA_13B, 5120, "Qwen--Qwen2.5-14B-Instruct", 256),
        member("mpt-7b", LLAMA_7B, 4096, "mistralai--Mistral-7B-Instruct-v0.3", 256),
        member("koala-13b", LLAMA_13B, 5120, "google--gemma-3-12b-it", 256),
        member("chatglm3-6b", LLAMA_7B, 4096, "Qwen--Qwen2.5-7B-Instruct-1M", 256),
        member("baize-13b", LLAMA_13B, 5120, "mistralai--Ministral-8B-Instruct-2410", 256),
        member("stablelm-7b", LLAMA_7B, 4096, "meta-llama--Llama-3.1-8B-Instruct", 256),
    ]
    return found[:count]


def routing_members() -> list[tuple[Member, float]]:
    """ROUTERBENCH's five open models (section 5.2) with the share of prompts routed to each."""
    return [
        (member("llama-2-70b", LLAMA_70B, 8192, "meta-llama--Llama-3.3-70B-Instruct", 512), 0.10),
        (member("mixtral-8x7b", MIXTRAL, 4096, "mistralai--Mixtral-8x7B-Instruct-v0.1", 512), 0.35),
        (member("wizardlm-13b", LLAMA_13B, 5120, "Qwen--Qwen2.5-14B-Instruct", 512), 0.25),
        (member("codellama-34b", CODELLAMA_34B, 8192, "Qwen--Qwen2.5-32B-Instruct", 512), 0.05),
        (member("mistral-7b", LLAMA_7B, 4096, "mistralai--Mistral-7B-Instruct-v0.3", 512), 0.25),
    ]


@dataclass(frozen=True)
class Scenario:
    """A job with its requests' true output lengths (``truth``) and each model's train-split eCDF."""

    application: str
    job: Job
    truth: dict[str, int]
    cdfs: dict[str, OutputLengthCDF]
    describe: str

    def told(self, known: bool) -> Job:
        """The job with every request's length known (``known``), or left for the planner to sample."""
        if not known:
            return self.job
        return replace(self.job, requests=tuple(replace(r, output_tokens=self.truth[r.request_id])
                                                for r in self.job.requests))


@dataclass(frozen=True)
class Data:
    """CASTILLO's validate rows by prompt, and its train split's eCDF per model."""

    prompts: dict[str, dict[str, CastilloAnswers]]
    cdfs: dict[str, OutputLengthCDF]


def read_data(data_dir: Path | None) -> Data:
    path = castillo_path(data_dir)
    if not path.is_file():
        raise MissingPrerequisite(f"CASTILLO is missing: {path} (the shared data's castillo/ folder; --data-dir)")
    return Data(read_castillo_answers(path, "validate"), load_castillo(path, "train"))


def answered_by_all(data: Data, members: Sequence[Member]) -> list[str]:
    return sorted(pid for pid, rows in data.prompts.items() if all(m.castillo in rows for m in members))


def ensembling(data: Data, models: int, prompts: int, rng: random.Random) -> Scenario:
    members = ensemble_members(models)
    chosen = rng.sample(answered_by_all(data, members), prompts)
    job = ensembling_job([m.node for m in members], [data.prompts[pid][members[0].castillo].input_tokens
                                                       for pid in chosen], NODE)
    truth = {f"{m.node.name}/{index}": rng.choice(data.prompts[pid][m.castillo].output_sizes)
             for m in members for index, pid in enumerate(chosen)}
    return Scenario("ensembling", job, truth, {m.node.name: data.cdfs[m.castillo] for m in members},
                    f"{models} models x {prompts} prompts, outputs <= 256")


def routing(data: Data, prompts: int, rng: random.Random) -> Scenario:
    members = routing_members()
    pool = answered_by_all(data, [m for m, _ in members])
    rng.shuffle(pool)
    routed: dict[str, list[str]] = {}
    start = 0
    for found, share in members:
        count = max(1, round(prompts * share))
        routed[found.node.name] = pool[start:start + count]
        start += count
    castillo = {m.node.name: m.castillo for m, _ in members}
    job = routing_job([m.node for m, _ in members],
                      {name: [data.prompts[pid][castillo[name]].input_tokens for pid in pids]
                       for name, pids in routed.items()}, NODE)
    truth = {f"{name}/{index}": rng.choice(data.prompts[pid][castillo[name]].output_sizes)
             for name, pids in routed.items() for index, pid in enumerate(pids)}
    counts = ", ".join(f"{name} {len(pids)}" for name, pids in routed.items())
    return Scenario("routing", job, truth, {m.node.name: data.cdfs[m.castillo] for m, _ in members},
                    f"{start} prompts routed ({counts}), outputs <= 512")


def chain_summary(data: Data, documents: int, rng: random.Random) -> Scenario:
    summarizer = member("vicuna-13b", LLAMA_13B, 5120, "Qwen--Qwen2.5-14B-Instruct", 900)
    evaluator = member("llama-2-70b", LLAMA_70B, 8192, "meta-llama--Llama-3.3-70B-Instruct", 900)
    # Skewed document lengths as in BookSum/BOOOOKSCORE (Figure 10): median 3 chunks, a long tail.
    chunks = [min(40, max(1, round(math.exp(rng.gauss(math.log(3), 0.9))))) for _ in range(documents)]
    docs = [[CHUNK_TOKENS] * (count - 1) + [rng.randint(256, CHUNK_TOKENS)] for count in chunks]
    job = chain_summary_job(summarizer.node, evaluator.node, docs, NODE, evaluations=2, instruction_tokens=64)
    answers = {m.node.name: [rows[m.castillo].output_sizes for rows in data.prompts.values() if m.castillo in rows]
               for m in (summarizer, evaluator)}
    truth = {r.request_id: rng.choice(rng.choice(answers[r.model])) for r in job.requests}
    return Scenario("chain summary", job, truth, {m.node.name: data.cdfs[m.castillo] for m in (summarizer, evaluator)},
                    f"{documents} documents, {sum(chunks)} chunks (longest {max(chunks)}), 2 evaluations, "
                    "summaries <= 900")


@dataclass(frozen=True)
class Method:
    label: str
    preemption: bool
    plan: Callable[[Job, dict[str, OutputLengthCDF], random.Random, Callable[[], float], CostModel, bool],
                   ApplicationPlan]


def _heuristic(kind: str) -> Callable[..., ApplicationPlan]:
    return lambda job, cdfs, rng, clock, cost, preemption: heuristic_plan(kind, job, cdfs, rng, clock, cost, preemption)


METHODS = (
    Method("SamuLLM", True, samullm_plan),
    Method("Max-heuristic", True, _heuristic("max")),
    Method("Min-heuristic", True, _heuristic("min")),
    Method("SamuLLM", False, samullm_plan),
    Method("Min-heuristic", False, _heuristic("min")),
)


@dataclass(frozen=True)
class Outcome:
    application: str
    lengths: str
    method: str
    preemption: bool
    stages: int
    search_s: float
    estimated_s: float
    executed_s: float

    @property
    def end_to_end_s(self) -> float:
        return self.search_s + self.executed_s


def evaluate(scenario: Scenario, known: bool, seed: int) -> list[Outcome]:
    """Plans the scenario with every method (lengths known or sampled) and executes each plan on the truth."""
    job = scenario.told(known)
    truth_job = scenario.told(True)
    truth = realise(truth_job, {}, random.Random(seed))
    executing = CostModel(truth_job)
    outcomes = []
    for method in METHODS:
        # NOTE: a fresh cost model per method, so none searches on another's simulations.
        plan = method.plan(job, scenario.cdfs, random.Random(seed), time.process_time, CostModel(job), method.preemption)
        executed = execute_plan(truth_job, plan.stages, truth, executing)
        outcomes.append(Outcome(scenario.application, "true" if known else "sampled", method.label, method.preemption,
                                len(plan.stages), plan.search_s, plan.inference_s, executed.inference_s))
    return outcomes


@dataclass(frozen=True)
class Comparison:
    """SamuLLM beside the better heuristic of one application, lengths and preemption setting."""

    application: str
    lengths: str
    preemption: bool
    ours: Outcome
    best: Outcome

    @property
    def speedup(self) -> float:
        """End to end (search plus executed inference), the paper's metric."""
        return self.best.end_to_end_s / self.ours.end_to_end_s

    @property
    def inference_speedup(self) -> float:
        return self.best.executed_s / self.ours.executed_s


def comparisons(outcomes: Sequence[Outcome]) -> list[Comparison]:
    """Per application, lengths and preemption: SamuLLM against the heuristic that finished soonest."""
    found = []
    keys = sorted({(o.application, o.lengths, o.preemption) for o in outcomes}, key=lambda k: (k[0], k[1], not k[2]))
    for application, lengths, preemption in keys:
        group = [o for o in outcomes if (o.application, o.lengths, o.preemption) == (application, lengths, preemption)]
        ours = next(o for o in group if o.method == "SamuLLM")
        best = min((o for o in group if o.method != "SamuLLM"), key=lambda o: o.end_to_end_s)
        found.append(Comparison(application, lengths, preemption, ours, best))
    return found


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="forethought bench samullm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small jobs (seconds; for tests)")
    parser.add_argument("--data-dir", type=Path, default=None, help="holds castillo/ (default: the data directory)")
    parser.add_argument("--seed", type=int, default=0)
    add_output_argument(parser, "samullm")
    return parser.parse_args(argv)


def scenarios(data: Data, quick: bool, seed: int) -> list[Scenario]:
    rng = random.Random(seed)
    if quick:
        return [ensembling(data, 2, 12, rng), routing(data, 20, rng), chain_summary(data, 3, rng)]
    return [ensembling(data, 4, 100, rng), routing(data, 150, rng), chain_summary(data, 12, rng)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    data = read_data(args.data_dir)
    jobs = scenarios(data, args.quick, args.seed)
    outcomes: list[Outcome] = []
    for scenario, known in progress([(s, k) for s in jobs for k in (True, False)], "applications"):
        outcomes.extend(evaluate(scenario, known, args.seed))
    command = ("forethought bench samullm " + shlex.join(argv if argv is not None else [])).strip()
    runs = ResultTable(["application", "lengths", "method", "preemption", "stages", "search_s (CPU)", "estimated_s",
                        "executed_s", "end-to-end_s", "vs SamuLLM"], title="Every plan, executed on the true lengths")
    for o in outcomes:
        ours = next(x for x in outcomes if (x.application, x.lengths, x.preemption, x.method)
                    == (o.application, o.lengths, o.preemption, "SamuLLM"))
        runs.add(o.application, o.lengths, o.method, "yes" if o.preemption else "no", o.stages, o.search_s,
                 o.estimated_s, o.executed_s, o.end_to_end_s, f"{o.end_to_end_s / ours.end_to_end_s:.2f}x")
    summary = ResultTable(["application", "lengths", "preemption", "SamuLLM end-to-end_s", "better heuristic",
                           "its end-to-end_s", "speedup end to end", f"aim {AIM}x", "SamuLLM inference_s",
                           "its inference_s", "speedup inference"],
                          title="SamuLLM against the better heuristic (end to end)")
    for c in comparisons(outcomes):
        summary.add(c.application, c.lengths, "yes" if c.preemption else "no", c.ours.end_to_end_s, c.best.method,
                    c.best.end_to_end_s, f"{c.speedup:.2f}x", "met" if c.speedup >= AIM else "missed",
                    c.ours.executed_s, c.best.executed_s, f"{c.inference_speedup:.2f}x")
    out = Path(args.out)
    preamble = (f"`{command}`\n\n" + "\n".join(f"- {s.application}: {s.describe}" for s in jobs) +
                f"\n\n8x {A100_80GB.name}; roofline cost profiles, assumed load times; seed {args.seed}; "
                f"{time.perf_counter() - started:.0f} s wall, load average {_load():.1f}.")
    write_table(out / "table.md", [summary, runs], preamble)
    (out / "results.json").write_text(json.dumps({"command": command, "outcomes": [
        {**o.__dict__, "end_to_end_s": o.end_to_end_s} for o in outcomes]}, indent=1))
    plot(out, outcomes)
    return 0


def _load() -> float:
    return os.getloadavg()[0]


def plot(out: Path, outcomes: Sequence[Outcome]) -> None:
    """One grouped bar chart per application: each method's end-to-end time, true and sampled lengths."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    for application in sorted({o.application for o in outcomes}):
        group = [o for o in outcomes if o.application == application]
        labels = [f"{o.method}{'' if o.preemption else ' (no preempt.)'}" for o in group if o.lengths == "true"]
        figure, axes = pyplot.subplots(figsize=(7.0, 4.0), dpi=110)
        width = 0.38
        for offset, lengths in ((-width / 2, "true"), (width / 2, "sampled")):
            values = [o.end_to_end_s for o in group if o.lengths == lengths]
            axes.bar([index + offset for index in range(len(values))], values, width, label=f"{lengths} lengths")
        axes.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=8)
        axes.set(title=f"{application}: end-to-end time on 8x A100 (simulated)", ylabel="seconds")
        axes.legend()
        figure.tight_layout()
        figure.savefig(out / f"{application.replace(' ', '_')}.png")
        pyplot.close(figure)


if __name__ == "__main__":
    raise SystemExit(main())

