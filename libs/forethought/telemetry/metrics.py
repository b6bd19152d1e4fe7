"""Prometheus metrics every service exports: calls, latencies, and gauges the services set."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from forethought.domain import ServiceClass

RPC_REQUESTS = Counter(
    "forethought_rpc_requests_total", "gRPC calls handled", ["service", "method", "code"]
)
RPC_LATENCY = Histogram(
    "forethought_rpc_latency_seconds",
    "gRPC call duration (streams: until the last message)",
    ["service", "method"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
QUEUE_DEPTH = Gauge("forethought_queue_depth", "requests waiting, by queue", ["service", "queue"])
DEGRADED = Gauge("forethought_degraded", "1 while a dependency is down and the service degrades", ["service", "dependency"])

# The scheduler's placements: where requests go, how the router chose, and what the prefix index promised.
PLACEMENTS = Counter(
    "forethought_placements_total", "requests placed on a worker, by how the router chose (E2: its phase)",
    ["model", "worker", "decision"],
)
PLACED_PROMPT_TOKENS = Counter("forethought_placed_prompt_tokens_total", "prompt tokens of placed requests", ["model"])
PLACED_CACHED_TOKENS = Counter(
    "forethought_placed_cached_tokens_total",
    "of those, the tokens the prefix index said the chosen worker caches (their ratio: the cluster prefix hit ratio)",
    ["model"],
)
QUEUE_WAIT = Histogram(
    "forethought_queue_wait_seconds", "arrival at the scheduler to placement on a worker, by service class (rt, be)",
    ["model", "service_class"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
PLACEMENT_DECISION = Histogram(
    "forethought_placement_decision_seconds",
    "one placement decision: from its placement cycle's prefix-index match to the router's choice",
    ["model"],
    buckets=(0.0001, 0.0002, 0.0003, 0.0004, 0.0005, 0.0006, 0.0008, 0.001, 0.00125, 0.0015, 0.00175, 0.002, 0.0025,
             0.003, 0.004, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25),
)
WORKER_TTFT = Histogram(
    "forethought_worker_ttft_seconds",
    "a request's arrival at the worker to its first token, by service class (rt, be): the engine's share of TTFT",
    ["model", "service_class"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30, 60),
)
SLO_REQUESTS = Counter(
    "forethought_slo_requests_total",
    "completed requests that set an objective (TTFT from arrival at the scheduler, mean TPOT), by whether it was met",
    ["model", "objective", "outcome"],
)
RESUMED_STREAMS = Counter(
    "forethought_resumed_streams_total",
    "streams whose worker was lost mid-way, resumed on another worker from the tokens already sent", ["model"],
)
FAILOVERS = Counter(
    "forethought_failovers_total", "requests whose worker was lost: retried elsewhere or failed", ["model", "outcome"]
)


SERVICE_CLASS_LABELS = {ServiceClass.RT: "rt", ServiceClass.BE: "be"}
"""The ``service_class`` label of a request's class, on every metric that has one."""


def start_metrics_server(host: str, port: int) -> int:
    """Serves /metrics; port 0 picks a free port. Returns the bound port."""
    server, _thread = start_http_server(port, addr=host)
    return int(server.server_port)
