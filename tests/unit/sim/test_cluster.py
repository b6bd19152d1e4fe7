import numpy as np
import pytest
from forethought.domain import ServiceClass
from forethought.engine.core import EngineConfig
from forethought.sim.config import ClusterConfig, build_simulator
from forethought.workloads.arrivals import poisson_arrivals, with_arrivals
from forethought.workloads.workload import (
    ClosedLoopBatches,
    Conversation,
    TokenSegment,
    Workload,
)

from .conftest import make_request


def _mixed_workload(seed: int) -> Workload:
    rng = np.random.default_rng(seed)
    requests = [make_request(f"rt{i}", prompt=int(rng.integers(16, 400)), output=int(rng.integers(1, 40)))
                for i in range(40)]
    batches = ClosedLoopBatches("be", batch_size=6, max_batches=3, seed=seed)
    return Workload(requests=tuple(with_arrivals(requests, poisson_arrivals(8.0, 40, rng))), batches=(batches,))


@pytest.mark.parametrize("policy", ["bros", "fcfs", "round_robin"])
def test_same_seed_gives_the_same_run(policy: str) -> None:
    config = ClusterConfig(engines=2, engine=EngineConfig(num_blocks=1, policy=policy), router="least_load")
    first = build_simulator(_mixed_workload(1), config).run()
    second = build_simulator(_mixed_workload(1), config).run()
    assert first.records == second.records
    assert first.metrics() == second.metrics()
    assert len(first.records) == 40 + 18 and first.unfinished == 0
    assert build_simulator(_mixed_workload(2), config).run().records != first.records


def test_every_request_generates_its_trace_length_after_its_arrival() -> None:
    workload = Workload(requests=(make_request("a", 0.0, output=7), make_request("b", 0.5, output=1)))
    result = build_simulator(workload, ClusterConfig()).run()
    records = {r.request_id: r for r in result.records}
    assert (records["a"].output_tokens, records["b"].output_tokens) == (7, 1)
    assert records["b"].arrival_s == 0.5
    for record in records.values():
        assert record.arrival_s < record.first_token_s <= record.finish_s


def test_closed_loop_batch_is_resubmitted_when_the_previous_one_completes() -> None:
    source = ClosedLoopBatches("be", batch_size=4, max_batches=3, start_s=1.0)
    result = build_simulator(Workload(batches=(source,)), ClusterConfig()).run()
    by_batch: dict[int, list] = {}
    for record in result.records:
        by_batch.setdefault(int(record.request_id.split("-b")[1].split("-")[0]), []).append(record)
    assert sorted(by_batch) == [0, 1, 2] and all(len(group) == 4 for group in by_batch.values())
    assert {r.arrival_s for r in by_batch[0]} == {1.0}
    for index in (1, 2):
        previous_done = max(r.finish_s for r in by_batch[index - 1])
        assert {r.arrival_s for r in by_batch[index]} == {previous_done}
    assert all(r.service_class is ServiceClass.BE for r in result.records)


def test_endless_closed_loop_runs_to_the_horizon() -> None:
    workload = Workload(batches=(ClosedLoopBatches("be", batch_size=2),))
    with pytest.raises(ValueError, match="needs a horizon"):
        build_simulator(workload, ClusterConfig()).run()
    result = build_simulator(workload, ClusterConfig()).run(until_s=20.0)
    assert result.duration_s == 20.0
    assert len(result.records) >= 6  # at least three batches of two
    assert all(r.finish_s <= 20.0 for r in result.records)
    assert result.metrics().of(ServiceClass.BE).requests_per_s == len(result.records) / 20.0


def test_next_turn_arrives_a_think_time_after_the_previous_turn_and_hits_its_prefix() -> None:
    shared = TokenSegment("conv", 1, 256)
    turns = (make_request("c-t0", segments=[shared], output=5),
             make_request("c-t1", segments=[shared, TokenSegment("conv", 2, 64)], output=3))
    workload = Workload(conversations=(Conversation("c", 2.0, turns, think_time_s=1.5),))
    records = {r.request_id: r for r in build_simulator(workload, ClusterConfig()).run().records}
    assert records["c-t0"].arrival_s == 2.0
    assert records["c-t1"].arrival_s == pytest.approx(records["c-t0"].finish_s + 1.5)
    assert records["c-t0"].cached_prompt_tokens == 0
    assert records["c-t1"].cached_prompt_tokens == 256


class RecordingRouter:
    """Alternates engines and keeps what it was shown."""

    name = "recording"

    def __init__(self) -> None:
        self.workers: list[str] = []
        self.seen: list = []
        self.finished: list[str] = []

    def add_worker(self, worker_id, now): self.workers.append(worker_id)
    def remove_worker(self, worker_id, now): self.workers.remove(worker_id)
    def observe_load(self, worker_id, stats, now): pass
    def observe_ttft(self, request_id, ttft_s, now): pass
    def on_finished(self, request_id, now, output_tokens=None): self.finished.append(request_id)

    def choose(self, request, now):
        self.seen.append(request)
        return self.workers[0] if request.request_id == "first" else self.workers[-1]


def test_router_sees_the_prefix_cached_by_engine_cache_events() -> None:
    from forethought.costmodel import CostModelExecutor, get_profile
    from forethought.engine.core import EngineCore
    from forethought.queueing import GlobalQueue, build_policy
    from forethought.sim.cluster import ClusterSimulator

    shared = TokenSegment("doc", 9, 160)
    workload = Workload(requests=(make_request("first", 0.0, segments=[shared], output=2),
                                  make_request("second", 5.0, segments=[shared, TokenSegment("q", 1, 20)])))
    executor = CostModelExecutor(get_profile("llama-13b-a100"))
    engines = {name: EngineCore(EngineConfig(num_blocks=512), executor) for name in ("e0", "e1")}
    router = RecordingRouter()
    simulator = ClusterSimulator(workload, engines, router, GlobalQueue(build_policy("fcfs")))
    simulator.run()
    first, second = router.seen
    assert first.cached_blocks == {}
    assert second.cached_blocks == {"e0": 10}
    assert second.block_hashes[:10] == first.block_hashes
    assert sorted(router.finished) == ["first", "second"]


def test_global_queue_holds_requests_beyond_the_per_engine_bound() -> None:
    workload = Workload(requests=tuple(make_request(f"r{i}", 0.0, prompt=512, output=20) for i in range(6)))
    unbounded = build_simulator(workload, ClusterConfig(max_waiting_per_engine=None)).run()
    bounded = build_simulator(workload, ClusterConfig(max_waiting_per_engine=1)).run()
    # With one admitted-but-waiting request at a time, prefills cannot be batched: first tokens spread out.
    first_tokens = sorted(r.first_token_s for r in bounded.records)
    assert len(set(first_tokens)) == 6
    assert max(r.first_token_s for r in unbounded.records) < first_tokens[-1]


def test_closed_loop_stops_submitting_at_its_stop_time() -> None:
    source = ClosedLoopBatches("be", batch_size=2, stop_s=3.0)
    result = build_simulator(Workload(batches=(source,)), ClusterConfig()).run()
    assert result.unfinished == 0
    assert max(r.arrival_s for r in result.records) < 3.0
    assert max(r.finish_s for r in result.records) > 3.0  # the last batch still completes


def test_a_request_no_engine_can_hold_is_refused_with_its_reason_and_counted() -> None:
    """Engines of 10 blocks of 16 tokens: "big" (150 + 20) and every closed-loop BE request (200 + its
    output) are refused on arrival; a refused batch counts as done, so the next one is submitted at once."""
    config = ClusterConfig(engines=2, engine=EngineConfig(num_blocks=1), kv_capacity_tokens=160)
    batches = ClosedLoopBatches("be", batch_size=2, prompt_tokens=(200, 200), max_batches=2, seed=0)
    requests = (make_request("a", 0.0, output=3), make_request("big", 0.1, prompt=150, output=20),
                make_request("b", 0.2, prompt=150, output=10))
    result = build_simulator(Workload(requests=requests, batches=(batches,)), config).run()
    assert sorted(r.request_id for r in result.records) == ["a", "b"]
    assert [(r.request_id, r.arrival_s, r.prompt_tokens, r.max_tokens) for r in result.refused] == [
        ("be-b0-0", 0.0, 200, 114), ("be-b0-1", 0.0, 200, 93), ("be-b1-0", 0.0, 200, 82),
        ("be-b1-1", 0.0, 200, 118), ("big", 0.1, 150, 20)]
    assert result.refused[-1].reason == (
        "prompt_tokens + max_tokens = 170 exceeds the KV capacity of every engine (160 tokens)")
    metrics = result.metrics()
    assert (metrics.overall.count, metrics.overall.refused) == (2, 5)
    assert (metrics.of(ServiceClass.RT).refused, metrics.of(ServiceClass.BE).refused) == (1, 4)
    assert metrics.of(ServiceClass.BE).count == 0 and result.unfinished == 0


def test_a_refused_turn_ends_its_conversation() -> None:
    shared = TokenSegment("conv", 1, 100)
    turns = (make_request("c-t0", segments=[shared], output=5),
             make_request("c-t1", segments=[shared, TokenSegment("conv", 2, 100)], output=5),
             make_request("c-t2", segments=[shared, TokenSegment("conv", 3, 10)], output=5))
    workload = Workload(conversations=(Conversation("c", 0.0, turns, think_time_s=1.0),))
    result = build_simulator(workload, ClusterConfig(kv_capacity_tokens=160)).run()
    assert [r.request_id for r in result.records] == ["c-t0"]
    assert [r.request_id for r in result.refused] == ["c-t1"]
    assert result.refused[0].arrival_s == pytest.approx(result.records[0].finish_s + 1.0)
    assert result.unfinished == 0


@pytest.mark.parametrize(
    ("config", "blocks"),
    [
        (ClusterConfig(profile="llama-7b-a100"), 111_618 // 16),
        (ClusterConfig(profile="llama-7b-a100", kv_capacity_tokens=65_536), 4096),
        (ClusterConfig(engine=EngineConfig(num_blocks=12), use_profile_capacity=False), 12),
        (ClusterConfig(engine=EngineConfig(num_blocks=12), use_profile_capacity=False, kv_capacity_tokens=100), 6),
    ],
    ids=["profile", "stated", "engine-blocks", "stated-over-engine-blocks"],
)
def test_the_kv_capacity_of_an_engine_is_stated(config: ClusterConfig, blocks: int) -> None:
    assert config.engine_config().num_blocks == blocks
