"""The blocking clients: an async client run on an event loop of its own, in a background thread, so the
blocking and asyncio clients share one implementation and behave the same."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


class AsyncClient(Protocol):
    async def close(self) -> None: ...


class BlockingClient:
    """Owns the loop thread and the async client made on it (``create`` runs there: a channel belongs to
    the loop it is made in)."""

    def __init__(self, create: Callable[[], AsyncClient]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="forethought-client", daemon=True)
        self._thread.start()

        async def made() -> AsyncClient:
            return create()

        self._client: Any = self._run(made())

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._run(self._client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()


def blocking(method: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]) -> Callable[Concatenate[BlockingClient, P], T]:
    """A method of an async client, as a blocking method of its ``BlockingClient``."""

    def call(self: BlockingClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(method(self._client, *args, **kwargs))

    call.__doc__ = method.__doc__
    return call


def blocking_stream(method: Callable[Concatenate[Any, P], AsyncIterator[T]]) -> Callable[Concatenate[BlockingClient, P], Iterator[T]]:
    """An async generator method of an async client, as a blocking iterator of its ``BlockingClient``."""

    def call(self: BlockingClient, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        stream = method(self._client, *args, **kwargs)

        async def next_item() -> T:
            return await anext(stream)

        try:
            while True:
                try:
                    yield self._run(next_item())
                except StopAsyncIteration:
                    return
        finally:
            self._run(stream.aclose())  # type: ignore[attr-defined]  # an async generator: stops the call

    call.__doc__ = method.__doc__
    return call
