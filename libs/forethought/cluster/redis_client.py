"""The services' connections to Redis, which holds the shared state: every command and connect is bounded
in time, so a Redis that stops answering (a frozen process, a cut network that leaves the connection open)
fails the calls waiting on it instead of holding them for the kernel's TCP timeout, and the loops that
retry (heartbeats, cache events, a planner job's end) reconnect once it answers again.
"""

from __future__ import annotations

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


def connect_redis(url: str, command_timeout_s: float | None = COMMAND_TIMEOUT_S) -> aioredis.Redis:
    """A client of the Redis at ``url`` (``--redis-url``). ``socket_timeout`` and ``socket_connect_timeout`` in
    the URL's query override the bounds; ``command_timeout_s=None`` leaves commands unbounded, for a caller
    that bounds each one itself."""
    return aioredis.from_url(url, socket_timeout=command_timeout_s, socket_connect_timeout=CONNECT_TIMEOUT_S,
                             socket_keepalive=True)
