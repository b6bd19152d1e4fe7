"""Redis restarted (and so flushed) under load: the workers' heartbeats find the index lost them and
re-publish what their engines cache, so requests sharing a prefix go back to the worker that holds it
and hit its cache again. Nothing sent is lost meanwhile."""

from __future__ import annotations

import threading
import time

import grpc
from forethought.cluster.redis_server import start_redis

from tests.integration.live_mesh import wait_until
from tests.integration.scheduler.test_scheduler import (
    SHARED_PREFIX,
    _cached_on,
    metered_front_door,
    metric,
    token_request,
    worker,
)


def test_after_a_redis_restart_workers_republish_and_prefix_hits_return(start_service, namespace):
    redis = start_redis()  # this test's own Redis: it restarts it
    own = ("--redis-url", redis.url)
    outcomes = {"sent": 0, "completed": 0, "failed": 0}
    try:
        for index in range(2):
            worker(start_service, f"w{index}", "20", *own)
        with metered_front_door(start_service, 2, *own) as (_front, stub, port):
            def send(name: str) -> tuple[str, int]:
                outcomes["sent"] += 1
                try:
                    replies = list(stub.Generate(token_request(name, SHARED_PREFIX + [len(name)] * 16, 4), timeout=30))
                except grpc.RpcError:
                    outcomes["failed"] += 1
                    raise
                outcomes["completed"] += 1
                return replies[0].worker_id, replies[-1].usage.cached_prompt_tokens

            home, _ = send("seed")
            wait_until(lambda: _cached_on(redis.url, namespace, home), "the seed's blocks reach the index")
            assert [send(f"before-{n}") for n in range(3)] == [(home, len(SHARED_PREFIX))] * 3

            stop = threading.Event()
            background: list[BaseException] = []

            def load() -> None:  # requests keep arriving across the restart
                number = 0
                while not stop.is_set():
                    number += 1
                    try:
                        send(f"load-{number}")
                    except BaseException as error:  # counted and asserted below
                        background.append(error)
                    time.sleep(0.05)

            loader = threading.Thread(target=load)
            loader.start()
            redis.stop()
            redis = start_redis(redis.port)  # the same address, empty
            restarted = time.monotonic()
            wait_until(lambda: _cached_on(redis.url, namespace, home), "the index is whole again", timeout_s=15)
            whole_s = time.monotonic() - restarted
            stop.set()
            loader.join(30)
            after = [send(f"after-{n}") for n in range(3)]
            republished = metric(port, "forethought_placed_cached_tokens_total")
    finally:
        redis.stop()
    print(f"index whole again {whole_s:.2f} s after the restart; {outcomes}")
    assert whole_s < 5.0  # within a heartbeat or two (1 s each) of the restart
    # Placed where the prefix is cached (requests during the outage may have cached it elsewhere too), and hit.
    assert [cached for _, cached in after] == [len(SHARED_PREFIX)] * 3
    assert republished > 0
    # Requests during the restart were served (by load while the index was empty or down), none lost.
    assert outcomes["sent"] == outcomes["completed"] + outcomes["failed"] and outcomes["failed"] == len(background) == 0
