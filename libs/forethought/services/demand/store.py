"""Where the demand service keeps its state in Redis: each application's PDGraph with everything it learnt,
and the steps of runs that have not finished yet.

Key layout (``ns`` is the configured namespace):
- ``{ns}:demand:applications``: a set of registered application names.
- ``{ns}:demand:application:{name}``: a string, the graph as JSON (``forethought.demand.graph_to_dict``:
  units, declared priors, every kept record); rewritten when the application is registered and after
  each run it learns from.
- ``{ns}:demand:run:{name}:{run_id}``: a list, one JSON step per finished step of a run still going on,
  with a TTL of ``run_ttl_s`` renewed by every step; deleted once the run is learnt from.
"""

from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis

from forethought.demand import Consumption, PDGraph, UnitExecution, graph_from_dict, graph_to_dict


class ProfileStore:
    """Reads and writes applications and unfinished runs under one namespace."""

    def __init__(self, client: aioredis.Redis, namespace: str, run_ttl_s: float) -> None:
        self._redis = client
        self._ns = namespace
        self._run_ttl_ms = int(run_ttl_s * 1000)

    def _application_key(self, name: str) -> str:
        return f"{self._ns}:demand:application:{name}"

    def _run_key(self, name: str, run_id: str) -> str:
        return f"{self._ns}:demand:run:{name}:{run_id}"

    async def save(self, graph: PDGraph) -> None:
        """Writes the whole graph, records included."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.sadd(f"{self._ns}:demand:applications", graph.name)
            pipe.set(self._application_key(graph.name), json.dumps(graph_to_dict(graph)))
            await pipe.execute()

    async def load(self, name: str) -> PDGraph | None:
        """The stored graph of ``name``, or None when it was never registered."""
        text = await self._redis.get(self._application_key(name))
        return None if text is None else graph_from_dict(json.loads(text))

    async def names(self) -> list[str]:
        members = await self._redis.smembers(f"{self._ns}:demand:applications")
        return sorted(_text(member) for member in members)

    async def run_steps(self, name: str, run_id: str) -> list[UnitExecution]:
        """The finished steps of an unfinished run, first to last."""
        return [_step_from_json(item) for item in await self._redis.lrange(self._run_key(name, run_id), 0, -1)]

    async def append_step(self, name: str, run_id: str, step: UnitExecution) -> None:
        key = self._run_key(name, run_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.rpush(key, json.dumps({"unit": step.unit, "consumption": step.consumption.to_dict()}))
            pipe.pexpire(key, self._run_ttl_ms)
            await pipe.execute()

    async def learn(self, graph: PDGraph, run_id: str) -> None:
        """Saves a graph that has just recorded the run ``run_id`` and forgets the run's pending steps."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(self._application_key(graph.name), json.dumps(graph_to_dict(graph)))
            pipe.delete(self._run_key(graph.name, run_id))
            await pipe.execute()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _step_from_json(item: bytes | str) -> UnitExecution:
    data: dict[str, Any] = json.loads(item)
    return UnitExecution(str(data["unit"]), Consumption.from_dict(data["consumption"], "step"))
