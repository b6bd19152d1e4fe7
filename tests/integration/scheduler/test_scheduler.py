"""The scheduler over real processes: E2 placement on a shared Redis index, failover, admission, degradation.

Sim workers stand in for engines (``--sim-speedup`` below 1 slows them so a test can act mid-request).
"""

from __future__ import annotations

import json
import re
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import pytest
from forethought.cluster.ports import free_port
from forethought.cluster.redis_server import start_redis
from forethought.domain.block_hashes import chained_block_hashes
from forethought.rpc.errors import Unavailable, rich_status_of
from forethought.services.scheduler.requests import StreamDetokenizer
from forethought.v1 import (
    common_pb2,
    scheduler_pb2,
    scheduler_pb2_grpc,
    tokenizer_pb2,
    tokenizer_pb2_grpc,
)
from google.rpc import error_details_pb2
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.live_mesh import wait_until

MODEL = "SmolLM2-135M-Instruct"
SHARED_PREFIX = list(range(1000, 1512))  # 32 blocks of 16 tokens


def token_request(request_id: str, prompt: list[int], max_tokens: int) -> scheduler_pb2.GenerateRequest:
    return scheduler_pb2.GenerateRequest(
        request_id=request_id, model=MODEL, token_ids=common_pb2.TokenIds(ids=prompt),
        max_tokens=max_tokens, sampling=common_pb2.SamplingParams(ignore_eos=True),
    )


def stub_of(address: str) -> Iterator[scheduler_pb2_grpc.SchedulerServiceStub]:
    with grpc.insecure_channel(address) as channel:
        yield scheduler_pb2_grpc.SchedulerServiceStub(channel)


def metric(port: int, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` with ``labels`` on a service's /metrics page (0 when none)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name and labels.items() <= sample.labels.items())


def adopted(stub: scheduler_pb2_grpc.SchedulerServiceStub, count: int) -> None:
    wait_until(lambda: len(stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5).workers) >= count,
               f"{count} workers registered")
    time.sleep(0.3)  # the scheduler's next registry read adopts them


def worker(start_service, worker_id: str, speedup: str, *args: str):
    return start_service("worker", "--engine", "sim", "--sim-speedup", speedup, "--worker-id", worker_id,
                         "--heartbeat-s", "0.5", "--heartbeat-ttl-s", "2", *args)


def scheduler(start_service, *args: str):
    return start_service("scheduler", "--registry-poll-s", "0.1", "--heartbeat-ttl-s", "2", *args)


@contextmanager
def metered_front_door(start_service, workers: int, *args: str) -> Iterator[tuple[Any, scheduler_pb2_grpc.SchedulerServiceStub, int]]:
    """A scheduler with a metrics port, once it has adopted ``workers`` workers: (its service, a stub, the port)."""
    port = free_port()
    front = scheduler(start_service, "--metrics-port", str(port), *args)
    with grpc.insecure_channel(front.address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        adopted(stub, workers)
        yield front, stub, port


def test_prefix_sharing_requests_follow_the_cache_across_scheduler_replicas(start_service, redis_server, namespace):
    for index in range(3):
        worker(start_service, f"w{index}", "20")
    first, second = scheduler(start_service), scheduler(start_service)
    with grpc.insecure_channel(first.address) as one, grpc.insecure_channel(second.address) as two:
        stubs = [scheduler_pb2_grpc.SchedulerServiceStub(one), scheduler_pb2_grpc.SchedulerServiceStub(two)]
        for stub in stubs:
            adopted(stub, 3)
        seed = list(stubs[0].Generate(token_request("seed", SHARED_PREFIX + [7] * 16, 4), timeout=30))
        home = seed[0].worker_id
        wait_until(lambda: _cached_on(redis_server.url, namespace, home), "the seed's blocks reach the index")
        placements = []
        for number in range(6):  # alternate replicas: the second sees the first one's placement via Redis
            prompt = SHARED_PREFIX + [number + 10] * 16
            replies = list(stubs[number % 2].Generate(token_request(f"r{number}", prompt, 4), timeout=30))
            placements.append(replies[0].worker_id)
            assert replies[-1].usage.cached_prompt_tokens >= len(SHARED_PREFIX)
    assert placements == [home] * 6


def _cached_on(redis_url: str, namespace: str, worker_id: str) -> bool:
    import asyncio

    import redis.asyncio as aioredis
    from forethought.prefix.redis_index import RedisPrefixIndex

    async def match() -> dict[str, int]:
        client = aioredis.from_url(redis_url)
        try:
            return await RedisPrefixIndex(client, namespace).match(chained_block_hashes(SHARED_PREFIX, 16))
        finally:
            await client.aclose()

    return asyncio.run(match()).get(worker_id, 0) >= len(SHARED_PREFIX) // 16


def test_metrics_show_where_requests_went_how_e2_chose_and_what_the_index_saved(start_service, redis_server, namespace):
    worker_ports = {f"w{index}": free_port() for index in range(2)}
    for worker_id, worker_port in worker_ports.items():
        worker(start_service, worker_id, "20", "--metrics-port", str(worker_port))
    with metered_front_door(start_service, 2) as (_, stub, port):
        home = list(stub.Generate(token_request("seed", SHARED_PREFIX + [7] * 16, 4), timeout=30))[0].worker_id
        wait_until(lambda: _cached_on(redis_server.url, namespace, home), "the seed's blocks reach the index")
        real_time = token_request("follower", SHARED_PREFIX + [8] * 16, 4)
        real_time.service_class = common_pb2.SERVICE_CLASS_REAL_TIME
        real_time.slo.ttft_s = 5
        follower = list(stub.Generate(real_time, timeout=30))
        # Each class's wait at the scheduler, and its time to first token at the worker that ran it.
        for service_class in ("be", "rt"):
            assert metric(port, "forethought_queue_wait_seconds_count", model=MODEL, service_class=service_class) == 1
            assert metric(worker_ports[home], "forethought_worker_ttft_seconds_count", service_class=service_class) == 1
        assert 0 < metric(worker_ports[home], "forethought_worker_ttft_seconds_sum", service_class="rt") < 30
    assert follower[0].worker_id == home
    assert metric(port, "forethought_placements_total", model=MODEL, decision="explore") == 1  # nothing cached yet
    assert metric(port, "forethought_placements_total", model=MODEL, worker=home, decision="exploit") == 1
    assert metric(port, "forethought_placed_prompt_tokens_total", model=MODEL) == 2 * (len(SHARED_PREFIX) + 16)
    assert metric(port, "forethought_placed_cached_tokens_total", model=MODEL) == len(SHARED_PREFIX)


def test_a_worker_killed_before_the_first_token_is_replaced_by_another(start_service):
    slow = worker(start_service, "a-slow", "0.001")  # placed first on ties; its prefill takes minutes
    worker(start_service, "b-fast", "20")
    with metered_front_door(start_service, 2) as (front, stub, port):
        stream = stub.Generate(token_request("survivor", list(range(200, 264)), 8), timeout=60)
        wait_until(lambda: _running(stub, "a-slow"), "the request runs on a-slow")
        slow.process.send_signal(signal.SIGKILL)
        replies = list(stream)
    assert replies[0].worker_id == "b-fast"
    assert sum(len(reply.token_ids) for reply in replies) == 8
    assert replies[-1].finish_reason == common_pb2.FINISH_REASON_LENGTH
    assert "worker a-slow was lost before the first token; retrying" in front.log()
    assert metric(port, "forethought_failovers_total", model=MODEL, outcome="retried") == 1


def _running(stub: scheduler_pb2_grpc.SchedulerServiceStub, worker_id: str) -> bool:
    for info in stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5).workers:
        if info.worker_id == worker_id:
            load = info.load
            return load.best_effort.running + load.best_effort.waiting + load.real_time.running + load.real_time.waiting > 0
    return False


@pytest.mark.parametrize("sent", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "frozen"])
def test_a_worker_lost_after_the_first_token_fails_the_stream_cleanly(start_service, sent):
    """Killed, its stream breaks; frozen, the stream stays open and the registry says it died. Sampled
    without a seed, the stream cannot be resumed elsewhere: it fails saying how much was delivered."""
    workers = {name: worker(start_service, name, "1") for name in ("w0", "w1")}
    try:
        with metered_front_door(start_service, 2) as (_, stub, port):
            stream = stub.Generate(token_request("doomed", list(range(300, 364)), 4000), timeout=30)
            first = next(stream)
            workers[first.worker_id].process.send_signal(sent)
            began = time.monotonic()
            with pytest.raises(grpc.RpcError) as failed:
                list(stream)
            waited_s = time.monotonic() - began
    finally:
        for service in workers.values():
            service.process.send_signal(signal.SIGKILL)
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "after the first token" in failed.value.details() and "not resumable" in failed.value.details()
    assert re.search(r"; [1-9]\d* tokens were delivered", failed.value.details())
    assert waited_s < 15  # at worst the heartbeat's 2 s TTL and a probe, not the call's 30 s deadline
    assert metric(port, "forethought_failovers_total", model=MODEL, outcome="failed") == 1


@pytest.mark.parametrize("sent", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "frozen"])
@pytest.mark.parametrize("sampling", [common_pb2.SamplingParams(temperature=0.0, ignore_eos=True),
                                      common_pb2.SamplingParams(seed=7, ignore_eos=True)], ids=["greedy", "seeded"])
def test_a_greedy_or_seeded_stream_resumes_on_another_worker_after_losing_its_own(start_service, sent, sampling):
    """The client sees one unbroken stream: the rest comes from the other worker, which is given the prompt
    and the tokens already sent, and the usage counts the whole request."""
    workers = {name: worker(start_service, name, "3") for name in ("w0", "w1")}
    prompt = list(range(300, 364))
    request = token_request("resumed", prompt, 300)
    request.sampling.CopyFrom(sampling)
    try:
        with metered_front_door(start_service, 2) as (_, stub, port):
            stream = stub.Generate(request, timeout=60)
            first = next(stream)
            replies = [first, next(stream), next(stream)]
            workers[first.worker_id].process.send_signal(sent)
            replies += list(stream)
    finally:
        for service in workers.values():
            service.process.send_signal(signal.SIGKILL)
    movers = [reply.worker_id for reply in replies if reply.worker_id]
    assert movers[0] == first.worker_id and len(movers) == 2 and movers[1] != first.worker_id
    assert sum(len(reply.token_ids) for reply in replies) == 300
    assert replies[-1].finish_reason == common_pb2.FINISH_REASON_LENGTH
    assert (replies[-1].usage.prompt_tokens, replies[-1].usage.output_tokens) == (len(prompt), 300)
    assert metric(port, "forethought_resumed_streams_total", model=MODEL) == 1


def test_a_hung_worker_is_given_up_when_its_heartbeat_expires_and_its_request_moves(start_service):
    """A frozen worker keeps its connections open, so its stream never breaks: the registry says it died."""
    hung = worker(start_service, "a-hung", "20")
    front = scheduler(start_service)
    try:
        with grpc.insecure_channel(front.address) as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            adopted(stub, 1)
            list(stub.Generate(token_request("seed", SHARED_PREFIX + [7] * 16, 4), timeout=30))
            worker(start_service, "b-live", "20")
            adopted(stub, 2)  # before a-hung is lost, so its request has somewhere to move
            hung.process.send_signal(signal.SIGSTOP)  # still registered: E2 exploits its cached prefix
            began = time.monotonic()
            replies = list(stub.Generate(token_request("moved", SHARED_PREFIX + [8] * 16, 8), timeout=30))
            waited_s = time.monotonic() - began
    finally:
        hung.process.send_signal(signal.SIGKILL)
    assert replies[0].worker_id == "b-live"
    assert waited_s < 15  # the heartbeat's 2 s TTL, not a connect timeout
    assert sum(len(reply.token_ids) for reply in replies) == 8
    assert replies[-1].finish_reason == common_pb2.FINISH_REASON_LENGTH
    assert "worker a-hung was lost before the first token; retrying" in front.log()


def test_a_draining_worker_finishes_its_stream_and_takes_no_new_request(start_service):
    draining = start_service("worker", "--engine", "sim", "--sim-speedup", "1", "--worker-id", "w0",
                             "--heartbeat-s", "0.5", "--heartbeat-ttl-s", "2", "--grace-s", "60")
    front = scheduler(start_service)
    with grpc.insecure_channel(front.address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        adopted(stub, 1)
        stream = stub.Generate(token_request("finishing", list(range(600, 664)), 40), timeout=60)
        first = next(stream)
        draining.process.send_signal(signal.SIGTERM)
        wait_until(lambda: _health(stub, "w0") == scheduler_pb2.WORKER_HEALTH_DRAINING, "w0 drains")
        time.sleep(0.3)  # the scheduler's next registry read sees it
        with pytest.raises(grpc.RpcError) as refused:
            next(stub.Generate(token_request("late", list(range(700, 764)), 4), timeout=10))
        rest = list(stream)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "draining" in refused.value.details()
    assert len(first.token_ids) + sum(len(reply.token_ids) for reply in rest) == 40
    assert rest[-1].finish_reason == common_pb2.FINISH_REASON_LENGTH


def _health(stub: scheduler_pb2_grpc.SchedulerServiceStub, worker_id: str) -> int:
    workers = stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5).workers
    return next((info.health for info in workers if info.worker_id == worker_id), scheduler_pb2.WORKER_HEALTH_UNSPECIFIED)


def test_a_request_no_engine_can_hold_is_refused_naming_the_field_and_costs_no_worker(start_service):
    worker(start_service, "w0", "20")
    with metered_front_door(start_service, 1) as (_, stub, port):
        with pytest.raises(grpc.RpcError) as refused:
            list(stub.Generate(token_request("huge", list(range(30_000)), 5_000), timeout=20))
        after = list(stub.Generate(token_request("fits", list(range(64)), 4), timeout=20))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details().startswith("max_tokens: must be at most 2768")
    bad_request = error_details_pb2.BadRequest()
    assert rich_status_of(refused.value).details[0].Unpack(bad_request)
    assert bad_request.field_violations[0].field == "max_tokens"
    assert after[0].worker_id == "w0"  # the worker was not taken for lost
    assert metric(port, "forethought_failovers_total", model=MODEL) == 0


def test_a_full_queue_refuses_with_a_retry_hint_and_a_queued_request_can_be_cancelled(start_service):
    worker(start_service, "w0", "0.001")
    front = scheduler(start_service, "--max-queue", "1", "--max-waiting-per-worker", "1")
    with grpc.insecure_channel(front.address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        adopted(stub, 1)
        running = stub.Generate(token_request("running", list(range(64)), 4), timeout=60)
        wait_until(lambda: _running(stub, "w0"), "the first request runs on w0")  # calls on one channel may reorder
        waiting = stub.Generate(token_request("waiting", list(range(64, 128)), 4), timeout=60)
        outcome: dict[str, list[scheduler_pb2.GenerateResponse]] = {}
        reader = threading.Thread(target=lambda: outcome.setdefault("waiting", list(waiting)))
        reader.start()
        time.sleep(1.0)  # the second call reaches the scheduler's queue: w0 has no waiting slot left
        with pytest.raises(grpc.RpcError) as refused:
            next(stub.Generate(token_request("refused", list(range(128, 192)), 4), timeout=10))
        assert stub.Cancel(scheduler_pb2.CancelRequest(request_id="waiting"), timeout=5).cancelled
        reader.join(timeout=10)
        running.cancel()
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    hints = dict(refused.value.trailing_metadata() or ())
    assert float(hints["retry-after-s"]) > 0
    retry = error_details_pb2.RetryInfo()
    assert rich_status_of(refused.value).details[0].Unpack(retry)  # the same hint, as gRPC clients decode it
    assert retry.retry_delay.ToNanoseconds() / 1e9 == pytest.approx(float(hints["retry-after-s"]), abs=5e-4)
    assert outcome["waiting"][-1].finish_reason == common_pb2.FINISH_REASON_ABORT
    assert not any(reply.token_ids for reply in outcome["waiting"])


def test_without_a_predictor_the_scheduler_serves_degraded(start_service):
    worker(start_service, "w0", "20")
    tokenizer = start_service("tokenizer")
    metrics_port = free_port()
    front = scheduler(start_service, "--tokenizer-address", tokenizer.address,
                      "--predictor-address", f"127.0.0.1:{free_port()}", "--metrics-port", str(metrics_port))
    with grpc.insecure_channel(front.address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        adopted(stub, 1)
        request = scheduler_pb2.GenerateRequest(request_id="text", model=MODEL, text="Tell me about queues.",
                                                max_tokens=5, sampling=common_pb2.SamplingParams(ignore_eos=True))
        replies = list(stub.Generate(request, timeout=30))
    assert sum(len(reply.token_ids) for reply in replies) == 5
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    gauge = re.search(r'forethought_degraded\{dependency="predictor",service="scheduler"\} (\S+)', metrics)
    assert gauge is not None and float(gauge.group(1)) == 1.0
    assert "predictor unavailable" in front.log() and "degraded" in front.log()


def test_a_prompt_the_tokenizer_refuses_names_text_and_one_past_the_predictors_window_is_forecast(
        start_service, quick_artifact, tmp_path):
    """A refusal of one prompt is that request's fault: the dependency that refused it is not down, and a
    prompt longer than the predictor reads is forecast from its ends."""
    worker(start_service, "w0", "20")
    tokenizer = start_service("tokenizer")
    predictor = start_service("predictor", "--model-dir", str(quick_artifact), "--observations-path",
                              str(tmp_path / "observations.jsonl"), timeout_s=120)
    too_long = scheduler_pb2.GenerateRequest(model=MODEL, text="x" * (4 * 1024 * 1024 + 1), max_tokens=2)
    halves = [scheduler_pb2.ChatMessage(role="user", content="x" * (2 * 1024 * 1024)),
              scheduler_pb2.ChatMessage(role="user", content="y" * (2 * 1024 * 1024 + 1))]  # each under the limit, not both
    too_long_chat = scheduler_pb2.GenerateRequest(model=MODEL, chat=scheduler_pb2.ChatMessages(messages=halves),
                                                  max_tokens=2)
    # 250,000 spaces are about 4,000 tokens: past the predictor's 200,000 characters, within the engine's context
    long_prompt = scheduler_pb2.GenerateRequest(model=MODEL, text="Summarise this. " + " " * 250_000 + "Answer briefly.",
                                                max_tokens=3, sampling=common_pb2.SamplingParams(ignore_eos=True))
    with metered_front_door(start_service, 1, "--tokenizer-address", tokenizer.address, "--predictor-address",
                            predictor.address, "--predictor-timeout-s", "30") as (front, stub, port):
        with pytest.raises(grpc.RpcError) as refused:
            list(stub.Generate(too_long, timeout=60))
        with pytest.raises(grpc.RpcError) as refused_chat:
            list(stub.Generate(too_long_chat, timeout=60))
        replies = list(stub.Generate(long_prompt, timeout=60))
        degraded = {dependency: metric(port, "forethought_degraded", service="scheduler", dependency=dependency)
                    for dependency in ("tokenizer", "predictor")}
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    violation = error_details_pb2.BadRequest()
    assert rich_status_of(refused.value).details[0].Unpack(violation)
    assert violation.field_violations[0].field == "text"
    assert violation.field_violations[0].description == "each text must be at most 4194304 characters"
    assert refused_chat.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused_chat.value.details() == "chat.messages: must hold at most 4194304 characters of content in all"
    assert sum(len(reply.token_ids) for reply in replies) == 3
    assert replies[0].predicted_output_tokens > 0
    assert degraded == {"tokenizer": 0.0, "predictor": 0.0}
    assert "unavailable" not in front.log()


def test_a_worker_indexing_blocks_of_another_size_is_named_once_and_still_served(start_service):
    """Prompts hashed in 32-token blocks never match a cache indexed in 16-token ones: placement by load
    alone, which the scheduler must say rather than leave to a hit ratio of zero."""
    worker(start_service, "w0", "20")
    front = scheduler(start_service, "--block-size", "32")
    with grpc.insecure_channel(front.address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        adopted(stub, 1)
        request = scheduler_pb2.GenerateRequest(model=MODEL, token_ids=common_pb2.TokenIds(ids=list(range(200, 300))),
                                                max_tokens=3, sampling=common_pb2.SamplingParams(ignore_eos=True))
        assert sum(len(reply.token_ids) for reply in stub.Generate(request, timeout=30)) == 3
        time.sleep(0.5)  # several more registry reads
    told = ("worker w0 indexes its cache in blocks of 16 tokens, and this scheduler hashes prompts in blocks of 32 "
            "(--block-size): no prefix cached there can match; give both one size")
    assert front.log().count(told) == 1


def test_with_the_prefix_index_frozen_or_down_placement_goes_on_by_load(start_service):
    """Redis stalls (a frozen server keeps its socket open) or dies: the index is advice, so requests still
    land, the degraded gauge says so, and placement uses the index again once Redis answers."""
    redis = start_redis()  # this test's own Redis: it freezes and kills it
    own = ("--redis-url", redis.url)
    try:
        worker(start_service, "w0", "20", *own)
        with metered_front_door(start_service, 1, *own) as (front, stub, port):
            def served(name: str) -> int:
                return sum(len(reply.token_ids) for reply in
                           stub.Generate(token_request(name, SHARED_PREFIX + [len(name)] * 16, 4), timeout=20))

            assert served("before") == 4
            redis.process.send_signal(signal.SIGSTOP)
            began = time.monotonic()
            assert served("frozen") == 4
            frozen_s = time.monotonic() - began
            index_down = metric(port, "forethought_degraded", dependency="prefix_index")
            redis.process.send_signal(signal.SIGCONT)
            wait_until(lambda: served("thawed") == 4
                       and metric(port, "forethought_degraded", dependency="prefix_index") == 0, "the index is used again")
            redis.process.kill()
            redis.process.wait()
            began = time.monotonic()
            assert served("down") == 4
            down_s = time.monotonic() - began
    finally:
        redis.stop()
    assert index_down == 1
    assert frozen_s < 3 and down_s < 3, (frozen_s, down_s)  # a bounded wait on the index, not Redis client retries
    assert "prefix index unreachable" in front.log() and "prefix index reachable again" in front.log()


async def token_ids_of(stub: tokenizer_pb2_grpc.TokenizerServiceStub, text: str) -> list[int]:
    reply = await stub.Tokenize(tokenizer_pb2.TokenizeRequest(model=MODEL, texts=[text]), timeout=10)
    return list(reply.token_ids[0].ids)


async def test_the_text_a_stream_ends_in_the_middle_of_a_character_is_not_lost(start_service):
    tokenizer = start_service("tokenizer")
    async with grpc.aio.insecure_channel(tokenizer.address) as channel:
        stub = tokenizer_pb2_grpc.TokenizerServiceStub(channel)
        ids = await token_ids_of(stub, "ok🎉")
        cut_short, whole = StreamDetokenizer(stub, MODEL), StreamDetokenizer(stub, MODEL)
        held_back = await cut_short(ids[:-1])  # the stream stops inside the emoji
        at_the_end = await cut_short([], last=True)
        streamed = [await whole(ids[:1]), await whole(ids[1:], last=True)]
    assert (held_back, at_the_end) == ("", "ok\ufffd")
    assert "".join(streamed) == "ok🎉"


async def test_a_detokenize_stream_the_tokenizer_already_ended_is_reported_unavailable(start_service):
    tokenizer = start_service("tokenizer")
    async with grpc.aio.insecure_channel(tokenizer.address) as channel:
        stub = tokenizer_pb2_grpc.TokenizerServiceStub(channel)
        ids = await token_ids_of(stub, "Hello there")
        detokenize = StreamDetokenizer(stub, MODEL)
        assert await detokenize(ids[:1]) == "Hello"
        tokenizer.process.kill()
        await detokenize._call.code()  # the call has ended before the next token reaches it
        with pytest.raises(Unavailable, match="tokenizer failed while detokenizing the stream: UNAVAILABLE"):
            await detokenize(ids[1:])


def test_text_streams_through_the_tokenizer_and_losing_it_is_not_blamed_on_the_worker(start_service):
    worker(start_service, "w0", "2")  # slow enough to stop the tokenizer mid-stream
    tokenizer = start_service("tokenizer")
    told = scheduler_pb2.GenerateRequest(request_id="told", model=MODEL, text="Tell me about queues.", max_tokens=8,
                                         return_text=True, sampling=common_pb2.SamplingParams(ignore_eos=True))
    with metered_front_door(start_service, 1, "--tokenizer-address", tokenizer.address) as (_, stub, port), \
            grpc.insecure_channel(tokenizer.address) as direct:
        replies = list(stub.Generate(told, timeout=30))
        ids = [token for reply in replies for token in reply.token_ids]
        whole = tokenizer_pb2_grpc.TokenizerServiceStub(direct).Detokenize(
            tokenizer_pb2.DetokenizeRequest(model=MODEL, token_ids=[common_pb2.TokenIds(ids=ids)]), timeout=10).texts[0]
        cut_short = scheduler_pb2.GenerateRequest()
        cut_short.CopyFrom(told)
        cut_short.request_id, cut_short.max_tokens = "cut", 400
        stream = stub.Generate(cut_short, timeout=30)
        next(stream)
        tokenizer.process.kill()
        with pytest.raises(grpc.RpcError) as cut:
            list(stream)
        after = list(stub.Generate(token_request("after", list(range(64)), 4), timeout=20))
    assert len(ids) == 8 and "".join(reply.text for reply in replies) == whole != ""
    assert cut.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "tokenizer" in cut.value.details()
    assert after[0].worker_id == "w0"  # the worker was not taken for lost
    assert metric(port, "forethought_failovers_total", model=MODEL) == 0


def test_a_chat_reaches_the_predictor_with_the_lengths_of_its_earlier_answers(start_service, quick_artifact, tmp_path):
    worker(start_service, "w0", "20")
    tokenizer = start_service("tokenizer")
    observations = tmp_path / "observations.jsonl"
    predictor = start_service("predictor", "--model-dir", str(quick_artifact), "--observations-path", str(observations),
                              timeout_s=120)
    front = scheduler(start_service, "--tokenizer-address", tokenizer.address, "--predictor-address", predictor.address,
                      "--predictor-timeout-s", "30")
    turns = [("user", "Name a colour."), ("assistant", "Blue. " * 20), ("user", "Another?"), ("assistant", "Green."),
             ("user", "Go on.")]
    chat = scheduler_pb2.ChatMessages(messages=[scheduler_pb2.ChatMessage(role=role, content=text) for role, text in turns])
    with grpc.insecure_channel(front.address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        adopted(stub, 1)
        request = scheduler_pb2.GenerateRequest(request_id="chat", model=MODEL, chat=chat, max_tokens=5,
                                                sampling=common_pb2.SamplingParams(ignore_eos=True))
        assert sum(len(reply.token_ids) for reply in stub.Generate(request, timeout=60)) == 5
    wait_until(lambda: observations.exists() and observations.read_text().strip(), "the finished chat observed")
    observed = json.loads(observations.read_text().splitlines()[0])
    assert observed["earlier_answer_chars"] == [len("Blue. " * 20), len("Green.")]
    assert observed["output_tokens"] == 5
    assert observed["prompt"] == "\n".join(text for _, text in turns)
