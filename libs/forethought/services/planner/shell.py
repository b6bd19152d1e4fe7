"""Planner: offline multi-LLM batch jobs (SamuLLM) planned by sampling and simulation.

The contract is in protos/forethought/v1/planner.proto; until the planner library lands, every RPC
answers UNIMPLEMENTED while the service runs, reports health and lists itself in reflection.
"""

from __future__ import annotations

from dataclasses import dataclass

from forethought.config import ServiceSettings, option
from forethought.rpc.server import PlainService, ServiceSpec
from forethought.v1 import planner_pb2_grpc


@dataclass(frozen=True)
class Settings(ServiceSettings):
    port: int = option(50055, "gRPC port; 0 picks a free one")


def build(settings: Settings) -> PlainService:
    return PlainService(
        "forethought.v1.PlannerService", planner_pb2_grpc.add_PlannerServiceServicer_to_server,
        planner_pb2_grpc.PlannerServiceServicer(),
    )


SERVICE = ServiceSpec("planner", __doc__ or "", Settings, build)
