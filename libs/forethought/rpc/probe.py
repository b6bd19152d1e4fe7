"""A health probe for containers: ``python -m forethought.rpc.probe HOST:PORT`` exits 0 while the service
at that address answers SERVING on the standard gRPC health service, 1 otherwise.

Compose health checks run it inside each service's container; the images carry no ``grpc_health_probe``
binary, and the package already has the health client.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from forethought.rpc.channels import check_health, open_channel


async def probe(address: str, service: str = "", timeout_s: float = 2.0) -> str:
    """The health status name of ``address`` (SERVING, NOT_SERVING, ..., UNREACHABLE)."""
    async with open_channel(address, traced=False) as channel:
        return await check_health(channel, service, timeout_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m forethought.rpc.probe", description=__doc__)
    parser.add_argument("address", help="host:port of the gRPC service")
    parser.add_argument("--service", default="", help="health service name; empty = the whole server")
    parser.add_argument("--timeout-s", type=float, default=2.0, help="seconds the health call may take")
    args = parser.parse_args(argv)
    status = asyncio.run(probe(args.address, args.service, args.timeout_s))
    print(f"{args.address} {status}")
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    sys.exit(main())
