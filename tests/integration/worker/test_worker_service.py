"""The worker over real gRPC with the sim engine: prewarming, model lifecycle, registry and index upkeep."""

from __future__ import annotations

import asyncio
import signal
import time

import grpc
import pytest
import redis.asyncio as aioredis
from forethought.cluster.registry import WorkerRegistry
from forethought.domain.block_hashes import chained_block_hashes
from forethought.prefix.redis_index import RedisPrefixIndex
from forethought.v1 import (
    common_pb2,
    scheduler_pb2,
    scheduler_pb2_grpc,
    worker_pb2,
    worker_pb2_grpc,
)

PREFIX = list(range(1000, 1128))  # 128 tokens: 8 index blocks


def generate(stub, request_id: str, prompt: list[int], max_tokens: int = 2, model: str = ""):
    replies = list(stub.Generate(worker_pb2.WorkerServiceGenerateRequest(
        request_id=request_id, prompt_token_ids=prompt, max_tokens=max_tokens, model=model,
        sampling=common_pb2.SamplingParams(ignore_eos=True)), timeout=30))
    return replies[-1]


@pytest.fixture
def worker(start_service):
    return start_service("worker", "--engine", "sim", "--sim-speedup", "10", "--worker-id", "w-prewarm",
                         "--heartbeat-s", "0.5", "--heartbeat-ttl-s", "2")


def test_prewarming_a_prefix_makes_the_next_request_hit_the_cache(worker):
    with grpc.insecure_channel(worker.address) as channel:
        stub = worker_pb2_grpc.WorkerServiceStub(channel)
        warmed = stub.Prewarm(worker_pb2.PrewarmRequest(kind=worker_pb2.PREWARM_KIND_KV_PREFIX, prefix_token_ids=PREFIX), timeout=30)
        assert warmed.status == worker_pb2.PREWARM_STATUS_READY
        assert warmed.warmup_s > 0
        last = generate(stub, "after-prewarm", PREFIX + [7, 8, 9])
        assert last.usage.cached_prompt_tokens == 128
        stats = next(stub.Stats(worker_pb2.StatsRequest(interval_s=0.1), timeout=5))
        assert stats.prewarm_hits == 1
        assert stats.worker_id == "w-prewarm"


def test_tool_and_unsupported_prewarms_report_cleanly(worker):
    with grpc.insecure_channel(worker.address) as channel:
        stub = worker_pb2_grpc.WorkerServiceStub(channel)
        sandbox = stub.Prewarm(worker_pb2.PrewarmRequest(kind=worker_pb2.PREWARM_KIND_TOOL, target="python-sandbox"), timeout=60)
        assert sandbox.status == worker_pb2.PREWARM_STATUS_READY and sandbox.warmup_s > 0
        unknown = stub.Prewarm(worker_pb2.PrewarmRequest(kind=worker_pb2.PREWARM_KIND_TOOL, target="fpga"), timeout=10)
        assert unknown.status == worker_pb2.PREWARM_STATUS_UNSUPPORTED
        assert "fpga" in unknown.detail
        lora = stub.Prewarm(worker_pb2.PrewarmRequest(kind=worker_pb2.PREWARM_KIND_LORA, target="a", lora_path="/nowhere"), timeout=10)
        assert lora.status == worker_pb2.PREWARM_STATUS_UNSUPPORTED  # the sim engine serves no adapters
        with pytest.raises(grpc.RpcError) as raised:
            stub.Prewarm(worker_pb2.PrewarmRequest(kind=worker_pb2.PREWARM_KIND_UNSPECIFIED), timeout=10)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert raised.value.details().startswith("kind:")


def test_models_load_and_unload_by_name(worker):
    with grpc.insecure_channel(worker.address) as channel:
        stub = worker_pb2_grpc.WorkerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            generate(stub, "unknown-model", [1, 2, 3], model="second")
        assert raised.value.code() == grpc.StatusCode.NOT_FOUND
        assert stub.LoadModel(worker_pb2.LoadModelRequest(model="second"), timeout=30).load_s > 0
        assert generate(stub, "on-second", [1, 2, 3], model="second").finish_reason == common_pb2.FINISH_REASON_LENGTH
        assert stub.UnloadModel(worker_pb2.UnloadModelRequest(model="second"), timeout=30).unloaded
        with pytest.raises(grpc.RpcError) as raised:
            stub.UnloadModel(worker_pb2.UnloadModelRequest(model="SmolLM2-135M-Instruct"), timeout=10)
        assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_a_killed_workers_entries_expire_and_the_scheduler_stops_sending_to_it(start_service, redis_server, namespace):
    fast = ("--engine", "sim", "--sim-speedup", "10", "--heartbeat-s", "0.5", "--heartbeat-ttl-s", "2")
    doomed = start_service("worker", *fast, "--worker-id", "doomed")
    start_service("worker", *fast, "--worker-id", "survivor")
    scheduler = start_service("scheduler", "--registry-poll-s", "0.2", "--heartbeat-ttl-s", "2", "--router", "e2")
    prompt = list(range(5000, 5128))
    with grpc.insecure_channel(doomed.address) as channel:
        generate(worker_pb2_grpc.WorkerServiceStub(channel), "cache-it", prompt)

    async def index_state() -> tuple[dict[str, int], list[str]]:
        client = aioredis.from_url(redis_server.url)
        try:
            matched = await RedisPrefixIndex(client, namespace).match(chained_block_hashes(prompt, 16))
            workers = [record.worker_id for record in await WorkerRegistry(client, namespace).workers()]
            return matched, workers
        finally:
            await client.aclose()

    deadline = time.monotonic() + 10
    while asyncio.run(index_state())[0].get("doomed", 0) < 8 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert asyncio.run(index_state())[0]["doomed"] == 8
    doomed.process.send_signal(signal.SIGKILL)
    doomed.process.wait()
    time.sleep(3.0)  # past the 2 s heartbeat TTL
    matched, workers = asyncio.run(index_state())
    assert "doomed" not in matched
    assert workers == ["survivor"]
    with grpc.insecure_channel(scheduler.address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        for _ in range(4):
            replies = list(stub.Generate(scheduler_pb2.GenerateRequest(
                model="SmolLM2-135M-Instruct", token_ids=common_pb2.TokenIds(ids=prompt), max_tokens=2), timeout=30))
            assert replies[0].worker_id == "survivor"
            assert replies[-1].finish_reason == common_pb2.FINISH_REASON_LENGTH
