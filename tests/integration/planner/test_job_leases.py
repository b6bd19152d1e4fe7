"""A job's run lease in a real Redis: one planner holds it at a time, only its holder renews or gives it up, it
lapses unless renewed, and the runs whose lease lapsed are the ones another planner may take up."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis
from forethought.services.planner.job_store import JobStore


async def test_one_planner_holds_a_run_until_it_lets_go_or_the_lease_lapses(redis_server, namespace) -> None:
    client = aioredis.from_url(redis_server.url)
    store = JobStore(client, namespace)
    try:
        assert await store.hold("job-a", "planner-1", 0.5) and await store.hold("job-b", "planner-1", 30)
        assert not await store.hold("job-a", "planner-2", 30)  # held: refused, and left as it was
        assert await store.unheld_runs() == []
        await store.let_go("job-a", "planner-2", ended=True)  # not its lease: nothing changes
        assert await store.unheld_runs() == [] and not await store.hold("job-a", "planner-2", 30)

        await asyncio.sleep(0.6)  # job-a's lease lapses: its planner died
        assert await store.unheld_runs() == ["job-a"]
        assert await store.hold("job-a", "planner-2", 30) and not await store.hold("job-a", "planner-1", 30)
        assert await store.hold("job-a", "planner-2", 30)  # its holder renews it

        await store.let_go("job-b", "planner-1", ended=False)  # a stopping planner: the run is taken up
        assert await store.unheld_runs() == ["job-b"]
        await store.let_go("job-a", "planner-2", ended=True)  # a run that ended: no planner takes it up
        assert await store.unheld_runs() == ["job-b"]
    finally:
        await client.aclose()
