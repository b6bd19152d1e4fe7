"""The services' connections to Redis, which holds the shared state: every command and connect is bounded
in time, so a Redis that stops answering (a frozen process, a cut network that leaves the connection open)
fails the calls waiting on it instead of holding them for the kernel's TCP timeout, and the loops that
retry (heartbeats, cache events, a planner job's end) reconnect once it answers again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

REDIS_UNREACHABLE = (RedisConnectionError, RedisTimeoutError)
"""redis-py's errors for a Redis that is down, not answering within the bound, or still loading its data: the
same command may succeed once it is back (an error reply, such as NOREPLICAS, is not among them)."""

COMMAND_TIMEOUT_S = 5.0
"""Seconds one command may wait for Redis's answer: well above a healthy Redis's (sub-millisecond) and below
the callers' own deadlines. Blocking pubsub reads are not bounded by it."""

CONNECT_TIMEOUT_S = 5.0

WAIT_LOG_EVERY_S = 10.0
"""While a service waits for its Redis at start, how often it says so."""

log = logging.getLogger(__name__)


def connect_redis(url: str, command_timeout_s: float | None = COMMAND_TIMEOUT_S) -> aioredis.Redis:
    """A client of the Redis at ``url`` (``--redis-url``). ``socket_timeout`` and ``socket_connect_timeout`` in
    the URL's query override the bounds; ``command_timeout_s=None`` leaves commands unbounded, for a caller
    that bounds each one itself."""
    return aioredis.from_url(url, socket_timeout=command_timeout_s, socket_connect_timeout=CONNECT_TIMEOUT_S,
                             socket_keepalive=True)


def redis_location(url: str) -> str:
    """Where ``url`` points, without its password (for logs): ``host:port/db`` or the socket's path."""
    parts = urlsplit(url)
    return f"{parts.netloc.rpartition('@')[2]}{parts.path}" if parts.netloc else parts.path


async def wait_for_redis(client: aioredis.Redis, url: str, clock: Callable[[], float] = time.monotonic) -> None:
    """Returns once the Redis at ``url`` answers a PING. A service started before its Redis (containers come
    up in any order) waits here, not serving, saying so every ``WAIT_LOG_EVERY_S``, instead of exiting
    with a traceback; a stop signal ends the wait like any other part of the start."""
    delay_s, said_at = 0.1, None
    while True:
        try:
            await client.ping()
        except REDIS_UNREACHABLE as error:
            if said_at is None or clock() - said_at >= WAIT_LOG_EVERY_S:
                log.warning("waiting for Redis at %s (%s): this service starts serving once it answers "
                            "(--redis-url names it)", redis_location(url), error)
                said_at = clock()
            await asyncio.sleep(delay_s)
            delay_s = min(2 * delay_s, 1.0)
            continue
        if said_at is not None:
            log.info("Redis at %s answers", redis_location(url))
        return
