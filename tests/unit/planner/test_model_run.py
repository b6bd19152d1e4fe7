"""One model's run: the engine core stepped in virtual time, fed as inputs finish, cut at a time."""

from __future__ import annotations

import math

import pytest
from forethought.planner import EngineSettings, ExecutionPlan, RequestWork, run_model
from forethought.planner.latency import decode_flops, prefill_flops

from .conftest import FixedExecutor, make_model

MODEL = make_model("m")
CONFIG = EngineSettings().engine_config(MODEL, kv_capacity_tokens=100_000)


def work(request_id: str, output: int, prompt: int = 10, inputs: tuple[str, ...] = ()) -> RequestWork:
    return RequestWork(request_id, "m", prompt, output, inputs)


def run(requests: list[RequestWork], ready: dict[str, float] | None = None, dp: int = 1, load_s: float = 0.0,
        until: float = math.inf):
    ready = {r.request_id: 0.0 for r in requests} if ready is None else ready
    return run_model(MODEL, ExecutionPlan(dp, 1), requests, ready, FixedExecutor(1.0), CONFIG, load_s, until)


def test_a_request_takes_one_iteration_a_token_after_the_load() -> None:
    result = run([work("a", 5)], load_s=2.5)
    assert result.finish_s == {"a": 7.5}
    assert result.end_s == 7.5
    assert result.flops_at == (3.5, 4.5, 5.5, 6.5, 7.5)


def test_requests_of_one_replica_are_batched() -> None:
    assert run([work("a", 3), work("b", 5)]).finish_s == {"a": 3.0, "b": 5.0}


def test_data_parallel_replicas_split_requests_round_robin() -> None:
    one = run([work("a", 4), work("b", 4), work("c", 4), work("d", 4)], dp=2)
    assert one.finish_s == {"a": 4.0, "b": 4.0, "c": 4.0, "d": 4.0}
    # round-robin: a and c on replica 0, b and d on replica 1; a chain follows its first input
    uneven = run([work("a", 2), work("b", 6), work("c", 2, inputs=("a",))], dp=2)
    assert uneven.finish_s == {"a": 2.0, "b": 6.0, "c": 4.0}


def test_a_fused_self_loop_releases_the_next_chunk_when_the_previous_finishes() -> None:
    result = run([work("c0", 3), work("c1", 2, inputs=("c0",)), work("c2", 2, inputs=("c1",))],
                 ready={"c0": 0.0, "c1": 0.0, "c2": 0.0})
    assert result.finish_s == {"c0": 3.0, "c1": 5.0, "c2": 7.0}


def test_outside_inputs_set_ready_times_and_a_request_without_one_never_runs() -> None:
    result = run([work("a", 2), work("b", 2)], ready={"a": 10.0})
    assert result.finish_s == {"a": 12.0}
    assert result.end_s == math.inf


def test_a_cut_keeps_finished_requests_and_counts_the_others_tokens() -> None:
    result = run([work("a", 2), work("b", 6)], until=4.5)
    assert result.finish_s == {"a": 2.0}
    assert result.generated == {"b": 4}
    assert result.end_s == math.inf


def test_flops_until_sums_the_iterations_that_ended() -> None:
    result = run([work("a", 3)])
    assert result.flops_until(0.5) == 0.0
    assert result.flops_until(3.0) == pytest.approx(result.cumulative_flops[-1])
    assert result.cumulative_flops[0] > result.cumulative_flops[1] - result.cumulative_flops[0]  # prefill > decode


def test_recomputing_a_dropped_request_takes_time_but_adds_no_flops() -> None:
    requests = [work("a", 20), work("b", 20)]
    roomy = run(requests)
    tight_config = EngineSettings().engine_config(MODEL, kv_capacity_tokens=48)  # 3 blocks: both need 2
    tight = run_model(MODEL, ExecutionPlan(1, 1), requests, {"a": 0.0, "b": 0.0}, FixedExecutor(1.0), tight_config)
    assert tight.end_s > roomy.end_s
    per_request = prefill_flops(MODEL, 10) + sum(decode_flops(MODEL, 10 + g) for g in range(1, 20))
    assert roomy.cumulative_flops[-1] == pytest.approx(2 * per_request)
    assert tight.cumulative_flops[-1] == pytest.approx(2 * per_request)
