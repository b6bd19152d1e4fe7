"""A worker with the null engine (the placement benchmark's): answers at once, and still publishes its cache."""

from __future__ import annotations

import asyncio
import time

import grpc
import redis.asyncio as aioredis
from forethought.domain.block_hashes import chained_block_hashes
from forethought.prefix.redis_index import RedisPrefixIndex
from forethought.v1 import common_pb2, worker_pb2, worker_pb2_grpc

PROMPT = list(range(7000, 7100))  # 100 tokens: 6 full blocks of 16


def generate(stub: worker_pb2_grpc.WorkerServiceStub, request_id: str, prompt: list[int], max_tokens: int):
    return list(stub.Generate(worker_pb2.WorkerServiceGenerateRequest(
        request_id=request_id, prompt_token_ids=prompt, max_tokens=max_tokens,
        sampling=common_pb2.SamplingParams(ignore_eos=True)), timeout=30))


def test_the_null_engine_answers_max_tokens_at_once_and_reports_its_cache(start_service, redis_server, namespace):
    worker = start_service("worker", "--engine", "null", "--worker-id", "null-0", "--sim-kv-blocks", "8")
    with grpc.insecure_channel(worker.address) as channel:
        stub = worker_pb2_grpc.WorkerServiceStub(channel)
        first = generate(stub, "first", PROMPT, max_tokens=5)
        again = generate(stub, "again", PROMPT, max_tokens=1)
        evicting = generate(stub, "evicting", list(range(100, 164)), max_tokens=1)  # 4 new blocks: 2 evicted
    assert [list(reply.token_ids) for reply in first] == [[0, 0, 0, 0, 0]]
    assert first[-1].finish_reason == common_pb2.FINISH_REASON_LENGTH
    assert (first[-1].usage.prompt_tokens, first[-1].usage.cached_prompt_tokens, first[-1].usage.output_tokens) == (100, 0, 5)
    assert again[-1].usage.cached_prompt_tokens == 96
    assert evicting[-1].usage.cached_prompt_tokens == 0

    async def matched(prompt: list[int]) -> dict[str, int]:
        client = aioredis.from_url(redis_server.url)
        try:
            return await RedisPrefixIndex(client, namespace).match(chained_block_hashes(prompt, 16))
        finally:
            await client.aclose()

    deadline = time.monotonic() + 10
    while asyncio.run(matched(list(range(100, 164)))) != {"null-0": 4} and time.monotonic() < deadline:
        time.sleep(0.1)
    assert asyncio.run(matched(list(range(100, 164)))) == {"null-0": 4}
    # The least recently used blocks, the first two of PROMPT, were evicted, so it matches no leading block.
    assert asyncio.run(matched(PROMPT)) == {}
