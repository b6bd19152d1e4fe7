"""The floor under the scheduler's cost per call: a front door that only relays (Preble section 5.4's
scheduler throughput, measured against what gRPC alone costs).

``forethought bench placement`` runs this next to the scheduler, under the same load and against the same
null-engine workers. It takes the same ``SchedulerService.Generate`` call, sends the worker the same
``WorkerServiceGenerateRequest`` (workers in turn) and streams the replies back, with nothing else: no
validation, queue, prefix index, router, tracing or metrics interceptor. Its CPU per call is what any
Python gRPC front door that streams through a worker pays before deciding anything.

Run: ``python -m benchmarks.bare_relay --port P --worker HOST:PORT [--worker ...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence

import grpc
from forethought.arguments import positive_int
from forethought.rpc.channels import wait_until_serving
from forethought.v1 import (
    scheduler_pb2,
    scheduler_pb2_grpc,
    worker_pb2,
    worker_pb2_grpc,
)
from grpc_health.v1 import health, health_pb2_grpc


class BareRelay(scheduler_pb2_grpc.SchedulerServiceServicer):
    def __init__(self, workers: Sequence[str]) -> None:
        self._workers = list(workers)
        self._stubs = [worker_pb2_grpc.WorkerServiceStub(grpc.aio.insecure_channel(address)) for address in workers]
        self._turn = itertools.cycle(range(len(workers)))

    async def Generate(self, request: scheduler_pb2.GenerateRequest,
                       context: grpc.aio.ServicerContext) -> AsyncIterator[scheduler_pb2.GenerateResponse]:
        turn = next(self._turn)
        call = self._stubs[turn].Generate(worker_pb2.WorkerServiceGenerateRequest(
            request_id=request.request_id, prompt_token_ids=request.token_ids.ids, max_tokens=request.max_tokens,
            sampling=request.sampling, service_class=request.service_class, slo=request.slo))
        async for chunk in call:
            yield scheduler_pb2.GenerateResponse(request_id=request.request_id, token_ids=chunk.token_ids,
                                                 finish_reason=chunk.finish_reason, worker_id=self._workers[turn])

    async def ListWorkers(self, request: scheduler_pb2.ListWorkersRequest,
                          context: grpc.aio.ServicerContext) -> scheduler_pb2.ListWorkersResponse:
        return scheduler_pb2.ListWorkersResponse(
            workers=[scheduler_pb2.WorkerInfo(worker_id=address, address=address) for address in self._workers])


async def serve(port: int, workers: Sequence[str]) -> None:
    """Listens once every worker is serving, so the first relayed call finds its worker up."""
    for address in workers:
        await wait_until_serving(address, 60)
    server = grpc.aio.server()
    scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(BareRelay(workers), server)
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


def port(text: str) -> int:
    """An argparse type: a TCP port, 1 to 65535."""
    number = positive_int(text)
    if number > 65_535:
        raise argparse.ArgumentTypeError(f"must be 65535 or less, not {number}")
    return number


def worker_address(text: str) -> str:
    """An argparse type: ``HOST:PORT``."""
    host, _, number = text.rpartition(":")
    if not host:
        raise argparse.ArgumentTypeError(f"must be HOST:PORT, not {text!r}")
    try:
        port(number)
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{text}: the port {error}") from None
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bare_relay", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=port, required=True)
    parser.add_argument("--worker", type=worker_address, action="append", required=True,
                        help="a worker's HOST:PORT (repeatable)")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.port, args.worker))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
