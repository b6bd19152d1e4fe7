"""``forethought bench rt-arrivals``: how long an RT request arriving between BROS iterations waits, with
and without the arrival guard (BROS section 4.2's residual bound, extended to the RT requests not yet
queued; ``docs/bros.md``, "RT arrivals between iterations").

One engine core on a cost profile, stepped in virtual time: RT requests with 64-token prompts and a TTFT
objective arrive by Poisson beside a fixed number of BE requests in flight (each finished BE request is
replaced at once), for every pair of BE count and guard share. The table gives the share of RT first tokens
within the objective, the TTFT mean and p90, and the BE output tokens per simulated second.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import statistics
from dataclasses import dataclass

from forethought.arguments import listed, non_negative_int, positive_number
from forethought.costmodel import PROFILES, CostModelExecutor, get_profile
from forethought.domain import GenerationRequest, SamplingParams, ServiceClass
from forethought.engine.core import EngineConfig, EngineCore
from forethought.engine.policies import ARRIVAL_GUARD_SHARE

from benchmarks.report import ResultTable, add_output_argument, progress, write_table

PROMPT_TOKENS = 64
OUTPUT_TOKENS = 32


@dataclass(frozen=True)
class ArrivalsResult:
    be_in_flight: int
    guard_share: float
    rt_ttft_s: tuple[float, ...]  # sorted
    be_tokens_per_s: float

    def within(self, objective_s: float) -> float:
        """Share of the RT first tokens within the objective; NaN when a short run saw none."""
        return sum(ttft <= objective_s for ttft in self.rt_ttft_s) / len(self.rt_ttft_s) if self.rt_ttft_s else math.nan


def replay(be_in_flight: int, guard_share: float, rt_rate: float, ttft_slo_s: float, duration_s: float,
           profile: str, seed: int) -> ArrivalsResult:
    """Steps one engine until ``duration_s`` of simulated time; RT arrivals are the same for every setting."""
    core = EngineCore(EngineConfig(num_blocks=4096, arrival_guard_share=guard_share),
                      CostModelExecutor(get_profile(profile)))
    rng = random.Random(seed)
    numbers = itertools.count(1)
    sampling = SamplingParams(ignore_eos=True)

    def request(prefix: str, service_class: ServiceClass, objective_s: float) -> GenerationRequest:
        number = next(numbers)  # distinct prompts: no request is served from another's cached prefix
        prompt = tuple((number * 7 + offset) % 30_000 + 10 for offset in range(PROMPT_TOKENS))
        return GenerationRequest(f"{prefix}-{number}", prompt, OUTPUT_TOKENS, service_class,
                                 ttft_slo_s=objective_s, sampling=sampling)

    now, next_rt = 0.0, rng.expovariate(rt_rate)
    be_live: set[str] = set()
    rt_arrivals: dict[str, float] = {}
    ttfts: list[float] = []
    be_tokens = 0
    while now < duration_s:
        while len(be_live) < be_in_flight:
            be = request("be", ServiceClass.BE, 0.0)
            core.add_request(be, now)
            be_live.add(be.request_id)
        while next_rt <= now:
            rt = request("rt", ServiceClass.RT, ttft_slo_s)
            core.add_request(rt, next_rt)
            rt_arrivals[rt.request_id] = next_rt
            next_rt += rng.expovariate(rt_rate)
        output = core.step(now)
        if output.duration_s == 0:  # idle until the next RT arrival
            now = next_rt
            continue
        now += output.duration_s
        for request_id, tokens in output.new_tokens.items():
            if request_id in rt_arrivals and tokens:
                ttfts.append(now - rt_arrivals.pop(request_id))
            elif request_id in be_live:
                be_tokens += len(tokens)
        be_live.difference_update(output.finished)
    return ArrivalsResult(be_in_flight, guard_share, tuple(sorted(ttfts)), be_tokens / now)


def guard_share(text: str) -> float:
    """An argparse type: a share of the TTFT objective above 0, or ``inf``: no guard."""
    return math.inf if text.lower() == "inf" else positive_number(text)


def share_label(share: float) -> str:
    return "none" if math.isinf(share) else f"{share:.3g} of the objective"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="forethought bench rt-arrivals", description=__doc__.split("\n\n")[0])
    parser.add_argument("--be-in-flight", type=listed(non_negative_int), default=[0, 16, 32],
                        help="comma-separated BE counts kept in flight (0: RT alone)")
    parser.add_argument("--shares", type=listed(guard_share), default=[math.inf, 0.5, ARRIVAL_GUARD_SHARE, 0.25],
                        help="comma-separated guard shares of the TTFT objective, above 0 (inf: no guard)")
    parser.add_argument("--rt-rate", type=positive_number, default=1.0, help="RT arrivals per simulated second")
    parser.add_argument("--ttft-slo-s", type=positive_number, default=1.0)
    parser.add_argument("--duration-s", type=positive_number, default=600.0, help="simulated seconds per run")
    parser.add_argument("--profile", default="smollm2-135m-cpu2", choices=sorted(PROFILES),
                        help="cost profile (the overload bench's worker)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="60 simulated seconds, 16 BE, no guard and the default")
    add_output_argument(parser, "rt_arrivals")
    args = parser.parse_args(argv)
    be_counts, shares = args.be_in_flight, args.shares
    if args.quick:
        args.duration_s, be_counts, shares = 60.0, [16], [math.inf, ARRIVAL_GUARD_SHARE]
    settings = [(count, share) for count in be_counts for share in shares]
    results = [replay(count, share, args.rt_rate, args.ttft_slo_s, args.duration_s, args.profile, args.seed)
               for count, share in progress(settings, "settings")]
    table = ResultTable(["BE in flight", "bound", f"RT TTFT within {args.ttft_slo_s:g} s", "RT TTFT mean s",
                         "RT TTFT p90 s", "BE output tokens/s"], title="RT arrivals beside BE in one engine")
    for result in results:
        ttfts = result.rt_ttft_s
        table.add(result.be_in_flight, share_label(result.guard_share), result.within(args.ttft_slo_s),
                  statistics.fmean(ttfts) if ttfts else None, ttfts[len(ttfts) * 9 // 10] if ttfts else None,
                  result.be_tokens_per_s)
    preamble = (f"Command: `{' '.join(['forethought bench rt-arrivals', *argv])}`; profile {args.profile}, RT "
                f"{args.rt_rate:g}/s with a {args.ttft_slo_s:g} s TTFT objective, {PROMPT_TOKENS}-token prompts, "
                f"{OUTPUT_TOKENS} output tokens, {args.duration_s:g} simulated s per setting, seed {args.seed}.")
    write_table(args.out / "table.md", [table], preamble)
    return 0
