"""Demand: application demand graphs (Hermes PDGraph), estimates, Gittins ranks and prewarm decisions.

The contract is in protos/forethought/v1/demand.proto; until the demand library lands, every RPC
answers UNIMPLEMENTED while the service runs, reports health and lists itself in reflection.
"""

from __future__ import annotations

from dataclasses import dataclass

from forethought.config import ServiceSettings, option
from forethought.rpc.server import PlainService, ServiceSpec
from forethought.v1 import demand_pb2_grpc


@dataclass(frozen=True)
class Settings(ServiceSettings):
    port: int = option(50054, "gRPC port; 0 picks a free one")


def build(settings: Settings) -> PlainService:
    return PlainService(
        "forethought.v1.DemandService", demand_pb2_grpc.add_DemandServiceServicer_to_server,
        demand_pb2_grpc.DemandServiceServicer(),
    )


SERVICE = ServiceSpec("demand", __doc__ or "", Settings, build)
