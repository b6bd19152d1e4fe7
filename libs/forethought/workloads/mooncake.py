"""Mooncake trace format (Mooncake, FAST'25 open trace): JSON lines with prefix-sharing block ids.

Each line: ``timestamp`` (ms since the trace start), ``input_length``, ``output_length`` and ``hash_ids``,
one id per 512-token block of the prompt. Each id expands into the same 512-token run wherever it occurs,
so requests with equal leading ids share an exact token prefix; the last block is cut to the prompt length.
``at_rate`` scales a trace's arrival times to a chosen mean rate, keeping the shape of its bursts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from forethought.workloads.workload import RequestClass, TokenSegment, TraceRequest

MOONCAKE_BLOCK_TOKENS = 512


def mooncake_prompt(input_length: int, hash_ids: list[int], namespace: str = "mooncake",
                    block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> tuple[TokenSegment, ...]:
    """Segments of one prompt: a ``block_tokens`` run per hash id, the last one cut to ``input_length``."""
    segments: list[TokenSegment] = []
    remaining = input_length
    for hash_id in hash_ids:
        if remaining <= 0:
            break
        length = min(block_tokens, remaining)
        segments.append(TokenSegment(namespace, hash_id, length))
        remaining -= length
    if remaining > 0:
        raise ValueError(f"input_length {input_length} needs more than {len(hash_ids)} blocks of "
                         f"{block_tokens} tokens")
    return tuple(segments)


def load_mooncake_trace(
    path: str | Path,
    limit: int | None = None,
    request_class: RequestClass = RequestClass(),
) -> list[TraceRequest]:
    """The first ``limit`` lines (all when None) of a Mooncake JSONL trace as requests (ids ``<stem>-<line>``)."""
    path = Path(path)
    requests: list[TraceRequest] = []
    with path.open() as file:
        for line_index, line in enumerate(line for line in file if line.strip()):
            if limit is not None and line_index >= limit:
                break
            record = json.loads(line)
            requests.append(TraceRequest(
                request_id=f"{path.stem}-{line_index}",
                arrival_s=float(record["timestamp"]) / 1000.0,
                prompt=mooncake_prompt(int(record["input_length"]), list(record["hash_ids"])),
                output_tokens=int(record["output_length"]),
                service_class=request_class.service_class,
                ttft_slo_s=request_class.ttft_slo_s,
                tpot_slo_s=request_class.tpot_slo_s,
            ))
    return requests


def at_rate(requests: Sequence[TraceRequest], rate_per_s: float) -> list[TraceRequest]:
    """The requests re-timed so their mean rate from the trace's start (time 0) is ``rate_per_s``: every
    arrival time is multiplied by one factor, so the trace's bursts and lulls keep their shape.

    Raises:
        ValueError: ``rate_per_s`` is not positive.
    """
    if rate_per_s <= 0:
        raise ValueError(f"rate_per_s must be positive, got {rate_per_s}")
    if not requests:
        return []
    last = max(request.arrival_s for request in requests)
    factor = len(requests) / rate_per_s / last if last > 0 else 1.0
    return [request.at(request.arrival_s * factor) for request in requests]
