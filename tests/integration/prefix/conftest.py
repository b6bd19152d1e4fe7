"""A client of the session's real redis-server (tests/conftest.py) for the prefix index tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from forethought.cluster.redis_server import RedisProcess
from redis.asyncio import Redis


@pytest.fixture
def redis_port(redis_server: RedisProcess) -> int:
    return redis_server.port


@pytest.fixture
async def redis_client(redis_port: int) -> AsyncIterator[Redis]:
    client = Redis(host="127.0.0.1", port=redis_port)
    yield client
    await client.aclose()
