"""The channel every client opens to a service: TLS when root certificates are given, plaintext otherwise."""

from __future__ import annotations

from typing import Self

import grpc

from forethought.rpc.channels import ChannelTls, open_channel


def client_channel(address: str, root_certs: bytes | None, client_cert: tuple[bytes, bytes] | None) -> grpc.aio.Channel:
    """A channel to ``address``; ``client_cert`` (PEM key, PEM chain) is shown to a service that requires one.
    Untraced: each call carries the trace context as metadata instead."""
    tls = ChannelTls(root_certs, *(client_cert or (None, None))) if root_certs is not None else None
    return open_channel(address, traced=False, tls=tls)


class ChannelClient:
    """An async client over one channel, or one per replica of a service: ``async with`` closes them."""

    def __init__(self, *channels: grpc.aio.Channel) -> None:
        self._channel = channels[0]
        self._channels = channels

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()
