"""Tensor parallelism reaches the workers: LoadModel takes the plan's degree, a sim worker records and reports
it, refuses more than its devices naming the field, and an already-loaded model answers this call's wait."""

from __future__ import annotations

import grpc
import pytest
from forethought.planner.job_file import load_job_file
from forethought.services.planner.servicer import job_to_proto
from forethought.v1 import planner_pb2, planner_pb2_grpc, worker_pb2, worker_pb2_grpc

from tests.integration.planner.test_planner_run import last_status


def test_a_sim_worker_loads_with_the_degree_asked_and_refuses_more_than_its_devices(start_service):
    worker = start_service("worker", "--engine", "sim", "--devices", "2", "--worker-id", "w-tp")
    with grpc.insecure_channel(worker.address) as channel:
        stub = worker_pb2_grpc.WorkerServiceStub(channel)
        first = stub.LoadModel(worker_pb2.LoadModelRequest(model="big", tensor_parallel_size=2), timeout=30)
        assert first.tensor_parallel_size == 2 and first.load_s > 0
        again = stub.LoadModel(worker_pb2.LoadModelRequest(model="big", tensor_parallel_size=2), timeout=30)
        assert again.load_s == 0.0 and again.tensor_parallel_size == 2  # this call waited for nothing
        assert stub.LoadModel(worker_pb2.LoadModelRequest(model="small"), timeout=30).tensor_parallel_size == 1
        for request, code in (
            (worker_pb2.LoadModelRequest(model="huge", tensor_parallel_size=4), grpc.StatusCode.INVALID_ARGUMENT),
            (worker_pb2.LoadModelRequest(model="big", tensor_parallel_size=1), grpc.StatusCode.FAILED_PRECONDITION),
        ):
            with pytest.raises(grpc.RpcError) as raised:
                stub.LoadModel(request, timeout=30)
            assert raised.value.code() == code
            assert raised.value.details().startswith("tensor_parallel_size: "), raised.value.details()
        assert "this worker has 2 device(s)" in raised.value.details() or "unload it first" in raised.value.details()
        assert stub.UnloadModel(worker_pb2.UnloadModelRequest(model="big"), timeout=30).unloaded
        assert stub.LoadModel(worker_pb2.LoadModelRequest(model="big", tensor_parallel_size=1),
                              timeout=30).tensor_parallel_size == 1


def test_a_run_sends_the_plans_degree_so_workers_with_fewer_devices_refuse_it(repo, start_service):
    job_file = load_job_file(repo / "examples" / "jobs" / "routing.yaml")
    planner = start_service("planner")
    for index in (1, 2):
        start_service("worker", "--engine", "sim", "--devices", "1", "--worker-id", f"one-gpu-{index}")
    with grpc.insecure_channel(planner.address) as channel:
        stub = planner_pb2_grpc.PlannerServiceStub(channel)
        planned = stub.Plan(planner_pb2.PlanRequest(job=job_to_proto(job_file), seed=job_file.seed, skip_baselines=True),
                            timeout=120)
        first = planned.stages[0].placements
        assert any(placement.gpus > 1 for placement in first), "the routing plan starts with a tensor-parallel model"
        stub.Run(planner_pb2.RunRequest(job_id=planned.job_id), timeout=30)
        status = last_status(stub, planned.job_id, timeout_s=60)
    assert status.state == planner_pb2.JOB_STATE_FAILED
    assert "no worker could load it" in status.error
    assert "INVALID_ARGUMENT tensor_parallel_size: must be 0 (one device) or 1..1" in status.error, status.error


def test_a_vllm_engine_split_over_devices_starts_with_the_multiprocess_executor(tmp_path) -> None:
    from forethought.backends.vllm.backend import VllmEngineOptions, engine_args, start_environment

    # A folder that exists: vLLM takes any other path for a Hugging Face repo id, which HF_HUB_OFFLINE refuses.
    model = tmp_path / "smol"
    model.mkdir()
    split = VllmEngineOptions(tensor_parallel_size=2)
    args = engine_args(split, model, "bfloat16", "ipc:///tmp/kv")
    assert (args.tensor_parallel_size, args.distributed_executor_backend) == (2, "mp")
    assert engine_args(VllmEngineOptions(), model, "float32", "ipc:///tmp/kv").distributed_executor_backend == "uni"
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in start_environment(split, on_cpu=True, usable_cpus=2)
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        VllmEngineOptions(tensor_parallel_size=0)
