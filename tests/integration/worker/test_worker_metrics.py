"""A live sim worker's /metrics: engine stats (running, waiting, KV use, prefix hit ratio, token rates)
and prewarm tallies, scraped over HTTP as Prometheus reads them."""

from __future__ import annotations

import re
import threading
import time
import urllib.request

import grpc
import pytest
from forethought.v1 import common_pb2, worker_pb2, worker_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

PREFIX = list(range(2000, 2128))  # 128 tokens: 8 index blocks
MODEL = "SmolLM2-135M-Instruct"


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the exposition, keyed by (name, labels)."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def sample(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


@pytest.fixture
def worker(start_service):
    return start_service("worker", "--engine", "sim", "--worker-id", "w-metrics", "--metrics-port", "0",
                         "--heartbeat-s", "0.5", "--heartbeat-ttl-s", "2")


@pytest.fixture
def metrics_url(worker) -> str:
    found = re.search(r"metrics on (http://\S+/metrics)", worker.log())
    assert found, f"the worker logged no metrics address:\n{worker.log()}"
    return found.group(1)


def test_prewarm_tallies_and_the_engine_hit_ratio_are_scraped(worker, metrics_url):
    with grpc.insecure_channel(worker.address) as channel:
        stub = worker_pb2_grpc.WorkerServiceStub(channel)
        warmed = stub.Prewarm(worker_pb2.PrewarmRequest(kind=worker_pb2.PREWARM_KIND_KV_PREFIX, prefix_token_ids=PREFIX), timeout=30)
        assert warmed.status == worker_pb2.PREWARM_STATUS_READY
        unknown = stub.Prewarm(worker_pb2.PrewarmRequest(kind=worker_pb2.PREWARM_KIND_TOOL, target="fpga"), timeout=10)
        assert unknown.status == worker_pb2.PREWARM_STATUS_UNSUPPORTED
        list(stub.Generate(worker_pb2.WorkerServiceGenerateRequest(
            request_id="after-prewarm", prompt_token_ids=PREFIX + [7, 8, 9], max_tokens=2,
            sampling=common_pb2.SamplingParams(ignore_eos=True)), timeout=30))
        stats = next(stub.Stats(worker_pb2.StatsRequest(interval_s=0.1), timeout=5))
    samples = scrape(metrics_url)
    outcomes = {(kind, outcome): sample(samples, "forethought_worker_prewarms_total", worker="w-metrics", kind=kind, outcome=outcome)
                for kind in ("kv_prefix", "tool") for outcome in ("warmed", "hit", "wasted", "unsupported", "failed")}
    assert {key: count for key, count in outcomes.items() if count} == {
        ("kv_prefix", "warmed"): 1, ("kv_prefix", "hit"): 1, ("tool", "unsupported"): 1}
    assert sample(samples, "forethought_worker_prewarm_wasted_seconds_total", worker="w-metrics", kind="kv_prefix") == 0
    # The hit took the prefix's measured warm-up off the request's path.
    assert 0 < sample(samples, "forethought_worker_prewarm_benefit_seconds_total", worker="w-metrics", kind="kv_prefix") \
        == pytest.approx(warmed.warmup_s, rel=1e-3)
    hit_ratio = sample(samples, "forethought_worker_prefix_hit_ratio", worker="w-metrics", model=MODEL)
    assert hit_ratio == pytest.approx(stats.load.prefix_hit_ratio) and hit_ratio > 0
    for phase in ("prefill", "decode"):
        assert sample(samples, "forethought_worker_tokens_per_second", worker="w-metrics", model=MODEL, phase=phase) >= 0
    assert sample(samples, "forethought_worker_kv_cache_usage", worker="w-metrics", model=MODEL) == 0  # nothing running


def test_a_running_request_shows_in_running_and_kv_use(worker, metrics_url):
    done = threading.Event()

    def long_request() -> None:
        with grpc.insecure_channel(worker.address) as channel:
            call = worker_pb2_grpc.WorkerServiceStub(channel).Generate(worker_pb2.WorkerServiceGenerateRequest(
                request_id="long", prompt_token_ids=PREFIX, max_tokens=1500,
                sampling=common_pb2.SamplingParams(ignore_eos=True)), timeout=120)
            for _reply in call:
                if done.is_set():
                    call.cancel()
                    return

    thread = threading.Thread(target=long_request)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        running = 0.0
        while time.monotonic() < deadline and running == 0:
            samples = scrape(metrics_url)
            running = sample(samples, "forethought_worker_running", worker="w-metrics", model=MODEL, service_class="be")
            time.sleep(0.05)
        assert running == 1
        assert sample(samples, "forethought_worker_running", worker="w-metrics", model=MODEL, service_class="rt") == 0
        assert sample(samples, "forethought_worker_waiting", worker="w-metrics", model=MODEL, service_class="be") == 0
        assert sample(samples, "forethought_worker_kv_cache_usage", worker="w-metrics", model=MODEL) > 0
    finally:
        done.set()
        thread.join(60)
