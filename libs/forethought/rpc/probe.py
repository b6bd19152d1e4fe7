"""A health probe for containers: ``python -m forethought.rpc.probe HOST:PORT`` exits 0 while the service
at that address answers SERVING on the standard gRPC health service, 1 otherwise.

Compose health checks run it inside each service's container; the images carry no ``grpc_health_probe``
binary, and the package already has the health client. ``--tls-ca`` probes a TLS service, and
``--tls-cert``/``--tls-key`` show a certificate to one that requires it (docs/access.md). Each flag defaults
to the service's own variable, ``FORETHOUGHT_TLS_CA``, ``FORETHOUGHT_TLS_CERT``, ``FORETHOUGHT_TLS_KEY``
(a flag beats the environment): in a container that runs its service with TLS, the same health check
probes over TLS with the service's own certificate, which a service requiring the mesh certificate accepts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from forethought.rpc.channels import ChannelTls, check_health, open_channel


async def probe(address: str, service: str = "", timeout_s: float = 2.0, tls: ChannelTls | None = None) -> str:
    """The health status name of ``address`` (SERVING, NOT_SERVING, ..., UNREACHABLE)."""
    async with open_channel(address, traced=False, tls=tls) as channel:
        return await check_health(channel, service, timeout_s)


def arguments(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> argparse.Namespace:
    """The probe's command line; each ``--tls-*`` flag not given takes its ``FORETHOUGHT_TLS_*`` variable."""
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(prog="python -m forethought.rpc.probe", description=__doc__)
    parser.add_argument("address", help="host:port of the gRPC service")
    parser.add_argument("--service", default="", help="health service name; empty = the whole server")
    parser.add_argument("--timeout-s", type=float, default=2.0, help="seconds the health call may take")
    parser.add_argument("--tls-ca", default=env.get("FORETHOUGHT_TLS_CA", ""),
                        help="PEM root certificates: probe over TLS [env FORETHOUGHT_TLS_CA]")
    parser.add_argument("--tls-cert", default=env.get("FORETHOUGHT_TLS_CERT", ""),
                        help="PEM certificate to show a service that requires one, with --tls-key [env FORETHOUGHT_TLS_CERT]")
    parser.add_argument("--tls-key", default=env.get("FORETHOUGHT_TLS_KEY", ""),
                        help="PEM private key of --tls-cert [env FORETHOUGHT_TLS_KEY]")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    own = (Path(args.tls_key).read_bytes(), Path(args.tls_cert).read_bytes()) if args.tls_cert else (None, None)
    tls = ChannelTls(Path(args.tls_ca).read_bytes(), *own) if args.tls_ca else None
    status = asyncio.run(probe(args.address, args.service, args.timeout_s, tls))
    print(f"{args.address} {status}")
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    sys.exit(main())
