"""The worker's LoadModel and UnloadModel over a model lifecycle: the tensor-parallel degree recorded for a
model lasts while its engine runs or starts, so loads that fail and unloads leave nothing behind, and a load
still starting holds its degree against concurrent calls."""

from __future__ import annotations

import asyncio

import pytest
from forethought.prewarm import ModelLifecycle, PrewarmAgent
from forethought.rpc.errors import FailedPrecondition, NotFound
from forethought.services.worker.servicer import WorkerServicer
from forethought.v1 import worker_pb2


def _servicer(clock, make_engine) -> WorkerServicer:
    def factory(model: str):
        if model.startswith("absent"):
            raise FileNotFoundError(f"no weights named {model!r}")  # as vLLM's engine answers an unknown name
        return make_engine(model)

    return WorkerServicer(PrewarmAgent(ModelLifecycle(factory, clock=clock), clock=clock, ttl_s=30.0), "primary", devices=2)


async def test_loads_that_fail_and_unloads_leave_no_degree_behind(clock, make_engine) -> None:
    servicer = _servicer(clock, make_engine)
    for index in range(3):
        with pytest.raises(NotFound, match="model: no weights named"):
            await servicer.LoadModel(worker_pb2.LoadModelRequest(model=f"absent-{index}", tensor_parallel_size=2), None)
    assert servicer.tensor_parallel == {"primary": 1}

    loaded = await servicer.LoadModel(worker_pb2.LoadModelRequest(model="second", tensor_parallel_size=2), None)
    assert loaded.tensor_parallel_size == 2 and servicer.tensor_parallel == {"primary": 1, "second": 2}
    assert (await servicer.UnloadModel(worker_pb2.UnloadModelRequest(model="second"), None)).unloaded
    assert servicer.tensor_parallel == {"primary": 1}
    # Unloaded, the model may come back with another degree.
    again = await servicer.LoadModel(worker_pb2.LoadModelRequest(model="second", tensor_parallel_size=1), None)
    assert again.tensor_parallel_size == 1 and servicer.tensor_parallel["second"] == 1


async def test_a_load_in_progress_refuses_another_degree_and_shares_its_own(clock, make_engine) -> None:
    release = asyncio.Event()

    class SlowStartEngine(make_engine):
        async def start(self) -> None:
            await release.wait()
            await super().start()

    servicer = _servicer(clock, SlowStartEngine)
    first = asyncio.create_task(servicer.LoadModel(worker_pb2.LoadModelRequest(model="second", tensor_parallel_size=2), None))
    await asyncio.sleep(0)  # the first load's start is now in progress
    with pytest.raises(FailedPrecondition, match="tensor_parallel_size: 'second' runs on this worker with 2, not 1"):
        # Bounded: a call that joined the start instead would wait on it for good.
        await asyncio.wait_for(servicer.LoadModel(worker_pb2.LoadModelRequest(model="second", tensor_parallel_size=1), None), 5)
    same = asyncio.create_task(servicer.LoadModel(worker_pb2.LoadModelRequest(model="second", tensor_parallel_size=2), None))
    await asyncio.sleep(0)
    release.set()
    replies = await asyncio.gather(first, same)
    assert [reply.tensor_parallel_size for reply in replies] == [2, 2]
    assert servicer.tensor_parallel == {"primary": 1, "second": 2}
