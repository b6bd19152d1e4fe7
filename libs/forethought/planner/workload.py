"""The work a job still holds, request by request (SamuLLM section 4.1, "put them all together").

``realise`` samples every request's output length once, from its model's eCDF and capped as section 4.1
caps it (or takes the known length), and fixes its prompt: its own tokens plus the outputs of its inputs.
The same sample then serves every plan the search compares, so plans differ only in how they run.

``Workload`` is the state between stages (Algorithm 1, line 25): the unfinished requests and the finished
models. A request a stage stopped half-way keeps what it generated: it is restarted with those tokens as
part of its prompt (the engine recomputes their KV cache) and only the rest to generate.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property

from forethought.domain import InvalidField
from forethought.planner.job import Job, topological_order
from forethought.planner.lengths import OutputLengthCDF, capped_length


@dataclass(frozen=True)
class RequestWork:
    """One unfinished request: its full prompt and the tokens it has left to generate."""

    request_id: str
    model: str
    prompt_tokens: int
    output_tokens: int
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class Workload:
    """Unfinished requests (in the job's order) and the set of finished requests."""

    remaining: tuple[RequestWork, ...]
    finished: frozenset[str]

    @cached_property
    def remaining_by_model(self) -> Mapping[str, tuple[RequestWork, ...]]:
        grouped: dict[str, list[RequestWork]] = {}
        for work in self.remaining:
            grouped.setdefault(work.model, []).append(work)
        return {model: tuple(found) for model, found in grouped.items()}

    def is_model_finished(self, model: str) -> bool:
        return model not in self.remaining_by_model

    @property
    def is_done(self) -> bool:
        return not self.remaining

    def advance(self, finished: set[str], generated: Mapping[str, int]) -> Workload:
        """The workload after a stage: ``finished`` requests leave, the others keep ``generated`` tokens."""
        remaining = []
        for work in self.remaining:
            if work.request_id in finished:
                continue
            done = generated.get(work.request_id, 0)
            if done:
                work = replace(work, prompt_tokens=work.prompt_tokens + done, output_tokens=work.output_tokens - done)
            remaining.append(work)
        return Workload(tuple(remaining), self.finished | finished)


def realise(job: Job, cdfs: Mapping[str, OutputLengthCDF], rng: random.Random) -> Workload:
    """Every request's prompt and output length; one draw from ``rng`` per request without a known length,
    in the job's order. InvalidField when a model needs an eCDF that ``cdfs`` lacks."""
    sampled: dict[str, int] = {}
    for request in job.requests:
        if request.output_tokens is not None:
            continue
        cdf = cdfs.get(request.model)
        if cdf is None:
            raise InvalidField(f"models[{request.model}]", "has requests of unknown output length but no eCDF")
        sampled[request.request_id] = cdf.sample(rng)
    lengths: dict[str, int] = {}
    prompts: dict[str, int] = {}
    order = topological_order([r.request_id for r in job.requests],
                              {r.request_id: r.inputs for r in job.requests}, "requests.inputs")
    for request_id in order:
        request = job.request_by_id[request_id]
        model = job.model_by_name[request.model]
        prompt = min(request.prompt_tokens + sum(lengths[source] for source in request.inputs), model.max_seq_len - 1)
        prompts[request_id] = prompt
        known = request.output_tokens
        drawn = known if known is not None else sampled[request_id]
        lengths[request_id] = capped_length(drawn, prompt, model.max_seq_len, model.max_output_tokens)
    remaining = tuple(
        RequestWork(r.request_id, r.model, prompts[r.request_id], lengths[r.request_id], r.inputs)
        for r in job.requests
    )
    return Workload(remaining, frozenset())
