"""Fixtures the integration folders share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from forethought.cluster.redis_server import RedisProcess

from tests.integration.live_mesh import Mesh, start_mesh, stop_mesh


@pytest.fixture(scope="module")
def sim_mesh(redis_server: RedisProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    """A live sim mesh with the HTTP front door (``live_mesh.start_mesh``), shared by the tests of a module."""
    started = start_mesh(redis_server.url, tmp_path_factory.mktemp("mesh"))
    yield started
    stop_mesh(started)
