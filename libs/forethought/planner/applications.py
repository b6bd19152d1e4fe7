"""The paper's three applications as jobs (SamuLLM section 3, Fig. 5; section 5.1-5.3).

* Ensembling: every model answers every request, independently (no edges).
* Routing: each request goes to one model (a special case of ensembling).
* Chain summary: a summariser walks each document chunk by chunk, each step taking the summary so far
  (a self-loop on the summariser, fused); an evaluator judges each final summary ``evaluations`` times.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from forethought.planner.job import Job, JobRequest
from forethought.planner.plans import DevicePool, ModelNode


def ensembling_job(models: Sequence[ModelNode], prompt_tokens: Sequence[int], devices: DevicePool) -> Job:
    """Each model answers each prompt; request ids are ``<model>/<index>``."""
    requests = tuple(
        JobRequest(f"{model.name}/{index}", model.name, tokens)
        for model in models
        for index, tokens in enumerate(prompt_tokens)
    )
    return Job(tuple(models), requests, devices)


def routing_job(models: Sequence[ModelNode], routed: Mapping[str, Sequence[int]], devices: DevicePool) -> Job:
    """``routed[model]``: the prompt lengths routed to that model; request ids are ``<model>/<index>``."""
    requests = tuple(
        JobRequest(f"{model.name}/{index}", model.name, tokens)
        for model in models
        for index, tokens in enumerate(routed.get(model.name, ()))
    )
    return Job(tuple(models), requests, devices)


def chain_summary_job(
    summarizer: ModelNode,
    evaluator: ModelNode,
    documents: Sequence[Sequence[int]],
    devices: DevicePool,
    evaluations: int = 1,
    instruction_tokens: int = 0,
    evaluator_prompt_tokens: int = 32,
) -> Job:
    """One summariser request per chunk (``doc<d>/chunk<k>``, taking chunk ``k - 1``'s summary) and
    ``evaluations`` evaluator requests per document (``doc<d>/eval<e>``, taking the last summary).

    Args:
        documents: each document's chunk lengths in tokens (the paper cuts 2,048-token chunks).
        instruction_tokens: the summarisation template added to every chunk.
        evaluator_prompt_tokens: the evaluation template around the summary.
    """
    requests: list[JobRequest] = []
    for doc, chunks in enumerate(documents):
        previous: tuple[str, ...] = ()
        for index, tokens in enumerate(chunks):
            request_id = f"doc{doc}/chunk{index}"
            requests.append(JobRequest(request_id, summarizer.name, tokens + instruction_tokens, previous))
            previous = (request_id,)
        for evaluation in range(evaluations if previous else 0):
            requests.append(JobRequest(f"doc{doc}/eval{evaluation}", evaluator.name,
                                       evaluator_prompt_tokens, previous))
    edges = ((summarizer.name, summarizer.name), (summarizer.name, evaluator.name))
    return Job((summarizer, evaluator), tuple(requests), devices, edges)
