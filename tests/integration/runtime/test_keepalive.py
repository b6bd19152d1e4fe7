"""Keepalive between the services (``forethought.rpc.channels`` and ``forethought.rpc.server``): a call to a
peer that froze without closing its connections fails UNAVAILABLE after the keepalive instead of waiting
forever, and a call that stays quiet through several keepalive pings to a live peer is not cut."""

from __future__ import annotations

import asyncio
import os
import signal

import grpc
import pytest
from forethought.rpc.channels import KEEPALIVE_TIME_MS, KEEPALIVE_TIMEOUT_MS, open_channel
from forethought.v1 import demand_pb2, demand_pb2_grpc, worker_pb2, worker_pb2_grpc

DETECTED_WITHIN_S = (KEEPALIVE_TIME_MS + KEEPALIVE_TIMEOUT_MS) / 1000 + 20  # a bound for a hang, not a speed goal


def test_a_stream_from_a_worker_that_freezes_fails_unavailable(start_service):
    worker = start_service("worker", "--engine", "sim", "--sim-speedup", "0.05")  # a token every few tenths of a second

    async def stream_until_it_ends() -> grpc.StatusCode:
        async with open_channel(worker.address, traced=False) as channel:
            call = worker_pb2_grpc.WorkerServiceStub(channel).Generate(worker_pb2.WorkerServiceGenerateRequest(
                request_id="frozen", prompt_token_ids=[1, 2, 3], max_tokens=5000))
            first = await call.read()
            assert first is not grpc.aio.EOF and first.token_ids
            os.killpg(worker.process.pid, signal.SIGSTOP)  # the process stops; the kernel keeps its sockets open
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                while await asyncio.wait_for(call.read(), DETECTED_WITHIN_S) is not grpc.aio.EOF:
                    pass
            return raised.value.code()

    try:
        assert asyncio.run(stream_until_it_ends()) == grpc.StatusCode.UNAVAILABLE
    finally:
        os.killpg(worker.process.pid, signal.SIGCONT)


def test_a_watch_with_nothing_to_say_outlasts_the_pings(start_service):
    """Without the servers' ping allowance (gRPC's default: a ping every five minutes on a quiet stream), the
    server answers the client's keepalive pings with GOAWAY once it has counted too many, and the watch ends
    UNAVAILABLE: after 50 s, measured with a server on gRPC's defaults."""
    demand = start_service("demand")
    quiet_for_s = 6 * KEEPALIVE_TIME_MS / 1000

    async def watch() -> bool:
        async with open_channel(demand.address, traced=False) as channel:
            call = demand_pb2_grpc.DemandServiceStub(channel).WatchPrewarm(demand_pb2.WatchPrewarmRequest())
            reading = asyncio.ensure_future(call.read())
            done, _ = await asyncio.wait([reading], timeout=quiet_for_s)
            assert not done, f"the watch ended after {quiet_for_s:.0f} s quiet: {reading.exception() or reading.result()}"
            still_open = not call.done()
            call.cancel()
            return still_open

    assert asyncio.run(watch())
