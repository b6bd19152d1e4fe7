"""The Python client against live services: a sim mesh for answers, cancels and deadlines; an address where
nothing listens and a scheduler with a full queue for retries."""

from __future__ import annotations

import asyncio
import threading
import time

import grpc
import pytest
from forethought.client import (
    AsyncForethoughtClient,
    ChatMessage,
    ClientError,
    ForethoughtClient,
    RetryPolicy,
    ServiceLevelObjective,
)
from forethought.cluster.ports import free_port
from forethought.domain import FinishReason, SamplingParams, ServiceClass

from tests.integration.live_mesh import MODEL, Mesh, wait_until

LONG = SamplingParams(ignore_eos=True)


def test_the_blocking_client_completes_a_chat_and_lists_the_workers(sim_mesh: Mesh):
    with ForethoughtClient(sim_mesh.scheduler) as client:
        completion = client.complete(model=MODEL, max_tokens=6, chat=[ChatMessage("user", "Hello there")], sampling=LONG)
        workers = client.list_workers()
    assert completion.finish_reason is FinishReason.LENGTH and len(completion.token_ids) == 6
    assert completion.text and completion.usage is not None and completion.usage.output_tokens == 6
    assert completion.usage.prompt_tokens > 3  # the chat template wraps the message
    assert completion.worker_id in {"w0", "w1"} and completion.forecast == 0.0  # no predictor in this mesh: FCFS
    assert sorted((w.worker_id, w.engine, w.health) for w in workers) == [("w0", "sim", "SERVING"), ("w1", "sim", "SERVING")]


def test_the_blocking_client_streams_and_names_the_worker_first(sim_mesh: Mesh):
    with ForethoughtClient(sim_mesh.scheduler) as client:
        chunks = list(client.generate(model=MODEL, max_tokens=5, prompt="Once upon a time", sampling=LONG, request_id="sync-1"))
    assert chunks[0].worker_id and chunks[0].request_id == "sync-1"
    assert sum(len(chunk.token_ids) for chunk in chunks) == 5
    assert chunks[-1].finish_reason is FinishReason.LENGTH and chunks[-1].usage is not None


async def test_the_async_client_sends_forethoughts_fields(sim_mesh: Mesh):
    async with AsyncForethoughtClient(sim_mesh.scheduler) as client:
        completion = await client.complete(model=MODEL, max_tokens=3, token_ids=list(range(200, 232)), sampling=LONG,
                                           service_class=ServiceClass.RT, slo=ServiceLevelObjective(ttft_s=5.0),
                                           deadline=time.time() + 60)
        with pytest.raises(ClientError) as refused:
            await client.complete(model=MODEL, max_tokens=3, prompt="Hi", service_class=ServiceClass.RT)
    assert completion.usage is not None and completion.usage.prompt_tokens == 32 and len(completion.token_ids) == 3
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT and refused.value.field == "slo"
    assert refused.value.attempts == 1  # a bad field is never retried


async def test_leaving_the_loop_early_lets_the_worker_go(sim_mesh: Mesh):
    async with AsyncForethoughtClient(sim_mesh.scheduler) as client:
        stream = client.generate(model=MODEL, max_tokens=8_000, prompt="Tell a long story", sampling=LONG)
        async for chunk in stream:
            if chunk.token_ids:
                break
        await stream.aclose()
        await asyncio.to_thread(wait_until, lambda: _load(sim_mesh) == 0, "the worker let the request go")


async def test_cancel_from_another_client_ends_the_stream_with_abort(sim_mesh: Mesh):
    async with AsyncForethoughtClient(sim_mesh.scheduler) as client, AsyncForethoughtClient(sim_mesh.scheduler) as other:
        chunks = []
        async for chunk in client.generate(model=MODEL, max_tokens=8_000, prompt="Tell a long story", sampling=LONG,
                                           request_id="to-cancel"):
            chunks.append(chunk)
            if len(chunks) == 2:
                assert await other.cancel("to-cancel")
        assert not await other.cancel("to-cancel")  # finished by now
    assert chunks[-1].finish_reason is FinishReason.ABORT


async def test_a_call_past_its_deadline_fails_without_a_retry(sim_mesh: Mesh):
    async with AsyncForethoughtClient(sim_mesh.scheduler, timeout_s=0.5) as client:
        with pytest.raises(ClientError) as late:
            await client.complete(model=MODEL, max_tokens=8_000, prompt="Tell a long story", sampling=LONG)
    assert late.value.code == grpc.StatusCode.DEADLINE_EXCEEDED and late.value.attempts == 1


async def test_an_unreachable_scheduler_is_retried_with_backoff_then_reported():
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    policy = RetryPolicy(max_attempts=3, initial_backoff_s=0.2, multiplier=2.0)
    async with AsyncForethoughtClient(f"127.0.0.1:{free_port()}", retry=policy, sleep=sleep, timeout_s=10) as client:
        with pytest.raises(ClientError) as down:
            await client.list_workers()
        with pytest.raises(ClientError):
            await client.complete(model=MODEL, max_tokens=1, prompt="Hi")
    assert down.value.code == grpc.StatusCode.UNAVAILABLE and down.value.attempts == 3
    assert waits == [0.2, 0.4, 0.2, 0.4]


def test_a_full_queue_is_retried_after_the_servers_hint(start_service):
    start_service("worker", "--engine", "sim", "--sim-speedup", "0.001", "--worker-id", "slow", "--heartbeat-s", "0.5",
                  "--heartbeat-ttl-s", "2")
    front = start_service("scheduler", "--registry-poll-s", "0.1", "--heartbeat-ttl-s", "2", "--max-queue", "1",
                          "--max-waiting-per-worker", "1")
    waits: list[float] = []

    async def run() -> ClientError:
        async def sleep(seconds: float) -> None:
            waits.append(seconds)

        async with AsyncForethoughtClient(front.address, retry=RetryPolicy(max_attempts=2), sleep=sleep) as client, \
                AsyncForethoughtClient(front.address) as holding:  # the holders' own retries are not the probe's
            await asyncio.to_thread(wait_until, lambda: _listed(front.address), "the worker registered")
            await asyncio.sleep(0.3)  # the scheduler's next registry read adopts it
            holders = []
            for n in range(2):  # one on the worker, then one waiting in the queue
                holders.append(asyncio.create_task(holding.complete(model=MODEL, max_tokens=4,
                                                                    token_ids=list(range(64 * n, 64 * n + 64)))))
                await asyncio.sleep(1.0)
            try:
                await client.complete(model=MODEL, max_tokens=4, token_ids=list(range(500, 564)))
            except ClientError as error:
                return error
            finally:
                for holder in holders:
                    holder.cancel()
                await asyncio.gather(*holders, return_exceptions=True)
        raise AssertionError("a third request found room in a full queue")

    full = asyncio.run(run())
    assert full.code == grpc.StatusCode.RESOURCE_EXHAUSTED and full.attempts == 2
    assert full.retry_after_s is not None and full.retry_after_s > 0
    assert len(waits) == 1 and waits[0] > 0 and waits[0] != RetryPolicy().backoff_s(1)  # the server's hint, not the backoff


def _load(mesh: Mesh) -> int:
    with ForethoughtClient(mesh.scheduler) as client:
        return sum(w.load.rt.running + w.load.rt.waiting + w.load.be.running + w.load.be.waiting for w in client.list_workers())


def _listed(address: str) -> bool:
    with ForethoughtClient(address) as client:
        return len(client.list_workers()) == 1


def test_the_blocking_client_can_be_used_from_threads(sim_mesh: Mesh):
    results: list[int] = []
    with ForethoughtClient(sim_mesh.scheduler) as client:
        threads = [threading.Thread(target=lambda n=n: results.append(len(client.complete(
            model=MODEL, max_tokens=n, prompt=f"Item {n}", sampling=LONG).token_ids))) for n in range(1, 5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(results) == [1, 2, 3, 4]
