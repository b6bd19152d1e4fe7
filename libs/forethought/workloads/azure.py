"""Azure LLM inference trace 2023 (the public production trace Splitwise and DistServe replay).

CSV columns: ``TIMESTAMP`` (arrival, ``YYYY-MM-DD HH:MM:SS.fffffff``), ``ContextTokens`` (prompt length)
and ``GeneratedTokens`` (output length). The trace has no prompt text, so every prompt is a unique
synthetic token run of the recorded length; arrivals are seconds after the trace's first request.
"""

from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path

import numpy as np

from forethought.workloads.data_dir import default_data_dir
from forethought.workloads.workload import RequestClass, TokenSegment, TraceRequest

AZURE_DIR = "azure-llm-inference-2023"
AZURE_FILES = {"conv": "AzureLLMInferenceTrace_conv.csv", "code": "AzureLLMInferenceTrace_code.csv"}


def azure_trace_path(kind: str = "conv", data_dir: str | Path | None = None) -> Path:
    """The CSV of the ``conv`` or ``code`` trace under ``data_dir`` (default: the shared data dir)."""
    if kind not in AZURE_FILES:
        raise ValueError(f"kind must be one of {sorted(AZURE_FILES)}, got {kind!r}")
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    return root / AZURE_DIR / AZURE_FILES[kind]


def load_azure_trace(
    path: str | Path,
    limit: int | None = None,
    request_class: RequestClass = RequestClass(),
) -> list[TraceRequest]:
    """The first ``limit`` rows (all when None) of an Azure trace CSV as requests.

    Request ids are ``<file stem>-<row>``, rows counted from 0 after the header.
    """
    path = Path(path)
    requests: list[TraceRequest] = []
    with path.open(newline="") as file:
        first_arrival: datetime | None = None
        for row_index, row in enumerate(csv.DictReader(file)):
            if limit is not None and row_index >= limit:
                break
            arrival = datetime.fromisoformat(row["TIMESTAMP"].strip())
            first_arrival = first_arrival or arrival
            requests.append(TraceRequest(
                request_id=f"{path.stem}-{row_index}",
                arrival_s=(arrival - first_arrival).total_seconds(),
                prompt=(TokenSegment(path.stem, row_index, int(row["ContextTokens"])),),
                output_tokens=int(row["GeneratedTokens"]),
                service_class=request_class.service_class,
                ttft_slo_s=request_class.ttft_slo_s,
                tpot_slo_s=request_class.tpot_slo_s,
            ))
    return requests


def azure_arrivals(kind: str, count: int, rate_per_s: float, data_dir: str | Path | None = None) -> np.ndarray:
    """Arrival times (s) of the first ``count`` requests of the ``conv`` or ``code`` trace, the gaps scaled so
    the mean rate is ``rate_per_s``: the trace's burstiness at a load of the caller's choosing.

    Raises:
        ValueError: the trace holds fewer than ``count`` requests.
    """
    path = azure_trace_path(kind, data_dir)
    arrivals = np.asarray([request.arrival_s for request in load_azure_trace(path, count)], dtype=np.float64)
    if len(arrivals) < count:
        raise ValueError(f"{path} holds {len(arrivals)} requests, fewer than the {count} asked")
    return arrivals * (count / rate_per_s / max(float(arrivals[-1]), 1e-9))
