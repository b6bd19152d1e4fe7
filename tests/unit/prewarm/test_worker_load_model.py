"""The worker's LoadModel and UnloadModel over a model lifecycle: the tensor-parallel degree recorded for a
model lasts while its engine runs or starts, so loads that fail and unloads leave nothing behind."""

from __future__ import annotations

import pytest
from forethought.prewarm import ModelLifecycle, PrewarmAgent
from forethought.rpc.errors import NotFound
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
