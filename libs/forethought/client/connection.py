"""The channel every client opens to a service: TLS when root certificates are given, plaintext otherwise."""

from __future__ import annotations

import grpc

from forethought.rpc.channels import ChannelTls, open_channel


def client_channel(address: str, root_certs: bytes | None, client_cert: tuple[bytes, bytes] | None) -> grpc.aio.Channel:
    """A channel to ``address``; ``client_cert`` (PEM key, PEM chain) is shown to a service that requires one.
    Untraced: each call carries the trace context as metadata instead."""
    tls = ChannelTls(root_certs, *(client_cert or (None, None))) if root_certs is not None else None
    return open_channel(address, traced=False, tls=tls)
