"""The access interceptor: calls to the guarded service need a known bearer token; the rest stay open."""

from __future__ import annotations

import socket

import grpc
import pytest
from forethought.access import tenants_of, token_hash
from forethought.rpc.access import AccessInterceptor, bearer_metadata, bearer_token
from forethought.rpc.interceptors import StatusInterceptor
from forethought.telemetry.metrics import RPC_REQUESTS
from forethought.v1 import demand_pb2, demand_pb2_grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

TOKEN = "a-token"
PORTS = range(56450, 56500)


class Demand(demand_pb2_grpc.DemandServiceServicer):
    async def RegisterApplication(self, request, context):
        return demand_pb2.RegisterApplicationResponse(application=request.application)

    async def WatchPrewarm(self, request, context):
        yield demand_pb2.WatchPrewarmResponse()


@pytest.fixture
async def channel():
    book = tenants_of({"tenants": [{"name": "t", "token_sha256": token_hash(TOKEN)}]})
    server = grpc.aio.server(interceptors=[AccessInterceptor(book, "forethought.v1.DemandService"), StatusInterceptor()])
    demand_pb2_grpc.add_DemandServiceServicer_to_server(Demand(), server)
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    address = next(f"127.0.0.1:{port}" for port in PORTS if _free(port))
    server.add_insecure_port(address)
    await server.start()
    async with grpc.aio.insecure_channel(address) as opened:
        yield opened
    await server.stop(0)


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@pytest.mark.parametrize(("metadata", "token"), [
    ((("authorization", "Bearer abc"),), "abc"),
    ((("authorization", "bearer  abc "),), "abc"),
    ((("x-other", "1"), ("authorization", "BEARER abc")), "abc"),
    ((("authorization", "Basic abc"),), None),
    ((("authorization", "Bearer "),), None),
    ((), None),
    (None, None),
], ids=["bearer", "lowercase-and-spaces", "among-others", "basic", "empty", "none", "no-metadata"])
def test_bearer_token_reads_the_authorization_metadata(metadata, token) -> None:
    assert bearer_token(metadata) == token


def test_bearer_metadata_round_trips() -> None:
    assert bearer_token(bearer_metadata(TOKEN)) == TOKEN
    assert bearer_metadata(None) == ()


async def test_unary_and_streaming_calls_need_a_known_token(channel) -> None:
    stub = demand_pb2_grpc.DemandServiceStub(channel)
    refused_before = RPC_REQUESTS.labels("DemandService", "RegisterApplication", "UNAUTHENTICATED")._value.get()
    for metadata in ((), (("authorization", "Bearer wrong"),)):
        with pytest.raises(grpc.aio.AioRpcError) as unary:
            await stub.RegisterApplication(demand_pb2.RegisterApplicationRequest(application="x"), metadata=metadata)
        assert unary.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as streaming:
            async for _ in stub.WatchPrewarm(demand_pb2.WatchPrewarmRequest(), metadata=metadata):
                pass
        assert streaming.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert RPC_REQUESTS.labels("DemandService", "RegisterApplication", "UNAUTHENTICATED")._value.get() == refused_before + 2
    reply = await stub.RegisterApplication(demand_pb2.RegisterApplicationRequest(application="x"),
                                           metadata=bearer_metadata(TOKEN))
    assert reply.application == "x"
    assert len([message async for message in stub.WatchPrewarm(demand_pb2.WatchPrewarmRequest(),
                                                                 metadata=bearer_metadata(TOKEN))]) == 1


async def test_other_services_need_no_token(channel) -> None:
    reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
