"""The application simulator on hand-checkable cases: one engine, one or two slots, runs whose every step
is known, so each completion time is a sum of request seconds from the cost profile."""

from __future__ import annotations

import math

import pytest
from forethought.appsim import AppRun, ClusterSpec, EngineModel, EstimateCache, build_order, simulate
from forethought.costmodel import get_profile
from forethought.demand import BackendKind, BackendSpec, Consumption, PDGraph, UnitExecution, application_from_dict
from forethought.domain import InvalidField

ENGINE = EngineModel(get_profile("llama-7b-a100"), slots=1)


def make_graph() -> PDGraph:
    """ask (LLM) -> run (a container tool) or end, half and half; the output follows the prompt, so a known
    prompt tells a short request from a long one (refinement)."""
    return application_from_dict({
        "name": "toy", "seed": 3, "profiling_runs": 200,
        "units": {
            "ask": {"backend": {"kind": "llm", "model": "Llama-2-7B"}, "next": {"run": 0.5, "end": 0.5},
                    "profile": {"input_tokens": {"uniform": [10, 400]},
                                "output_tokens": {"follows": "input_tokens", "scale": 1.0, "sigma": 0.05}}},
            "run": {"backend": {"kind": "tool", "tool": "container"},
                    "profile": {"tool_duration_s": 2.0}},
        },
    })


GRAPHS = {"toy": make_graph()}


def ask(output_tokens: int, parallelism: int = 1) -> UnitExecution:
    return UnitExecution("ask", Consumption(input_tokens=output_tokens, output_tokens=output_tokens, parallelism=parallelism))


def make_run(run_id: str, arrival_s: float, *steps: UnitExecution, deadline_s: float | None = None) -> AppRun:
    return AppRun(run_id, "toy", arrival_s, tuple(steps), client=run_id, deadline_s=deadline_s)


def seconds(output_tokens: int) -> float:
    return ENGINE.request_seconds(output_tokens, output_tokens)


def finish_times(order: str, runs: list[AppRun], cluster: ClusterSpec | None = None) -> dict[str, float]:
    estimates = EstimateCache(GRAPHS, ENGINE.unit_seconds, walks=200)
    result = simulate(runs, GRAPHS, build_order(order, estimates), cluster or ClusterSpec(ENGINE), estimates)
    return {outcome.run.run_id: outcome.finished_s for outcome in result.outcomes}


# A holds the only slot; B (long) arrives before C (short); who goes second is the order's choice.
BLOCKED = [make_run("A", 0.0, ask(200)), make_run("B", 0.01, ask(400)), make_run("C", 0.02, ask(10))]


@pytest.mark.parametrize(("order", "second"), [("fcfs", "B"), ("parrot", "B"), ("oracle", "C"), ("srpt-mean", "C"),
                                               ("gittins", "C")])
def test_when_the_slot_frees_the_order_picks_the_next_run(order: str, second: str) -> None:
    finish = finish_times(order, BLOCKED)
    third = "C" if second == "B" else "B"
    assert finish["A"] == pytest.approx(seconds(200))
    assert finish[second] == pytest.approx(seconds(200) + seconds(400 if second == "B" else 10))
    assert finish[third] == pytest.approx(seconds(200) + seconds(400) + seconds(10))


def test_the_oracle_mean_act_beats_fcfs_on_the_blocked_runs() -> None:
    def mean_act(finish: dict[str, float]) -> float:
        return sum(finish[r.run_id] - r.arrival_s for r in BLOCKED) / len(BLOCKED)

    assert mean_act(finish_times("oracle", BLOCKED)) < mean_act(finish_times("fcfs", BLOCKED))


def test_parallel_requests_share_the_batch_at_its_speed() -> None:
    two_slots = ClusterSpec(EngineModel(ENGINE.profile, slots=2))
    finish = finish_times("fcfs", [make_run("A", 0.0, ask(200, parallelism=2))], two_slots)
    assert two_slots.engine.speed(2) < 1.0
    assert finish["A"] == pytest.approx(seconds(200) / two_slots.engine.speed(2))


def test_a_parallel_step_on_one_slot_runs_its_requests_one_after_another() -> None:
    finish = finish_times("fcfs", [make_run("A", 0.0, ask(50, parallelism=3))])
    assert finish["A"] == pytest.approx(3 * seconds(50))


def container_warmup(backend: BackendSpec) -> float:
    return 1.5 if backend.kind is BackendKind.TOOL else 0.0


def test_a_cold_tool_waits_its_warm_up_once_per_run() -> None:
    tool = UnitExecution("run", Consumption(tool_duration_s=2.0))
    runs = [make_run("A", 0.0, ask(20), tool, ask(20), tool)]
    finish = finish_times("fcfs", runs, ClusterSpec(ENGINE, warmup_s=container_warmup))
    assert finish["A"] == pytest.approx(2 * seconds(20) + 2 * 2.0 + 1.5)


def test_a_prewarm_takes_the_warm_up_off_the_critical_path_and_counts_it() -> None:
    tool = UnitExecution("run", Consumption(tool_duration_s=2.0))
    runs = [make_run("A", 0.0, ask(400), tool)]
    estimates = EstimateCache(GRAPHS, ENGINE.unit_seconds, walks=200)
    cluster = ClusterSpec(ENGINE, warmup_s=container_warmup, prewarm_knob=0.5)
    result = simulate(runs, GRAPHS, build_order("fcfs"), cluster, estimates)
    prewarm = result.prewarm
    assert (prewarm.started, prewarm.used, prewarm.unused) == (1, 1, 0)
    assert prewarm.benefit_s == pytest.approx(1.5)  # the longest output: the warm-up ends before the step does
    assert result.outcomes[0].finished_s == pytest.approx(seconds(400) + 2.0)
    assert prewarm.waste_s + prewarm.benefit_s <= seconds(400)


def test_a_prewarm_the_run_never_uses_is_waste() -> None:
    runs = [make_run("A", 0.0, ask(400))]
    estimates = EstimateCache(GRAPHS, ENGINE.unit_seconds, walks=200)
    cluster = ClusterSpec(ENGINE, warmup_s=container_warmup, prewarm_knob=0.5)
    result = simulate(runs, GRAPHS, build_order("fcfs"), cluster, estimates)
    assert (result.prewarm.started, result.prewarm.used, result.prewarm.unused) == (1, 0, 1)
    assert 0 < result.prewarm.waste_s < seconds(400)
    assert result.prewarm.benefit_s == 0.0


def test_no_prewarm_with_a_knob_above_the_branch_probability() -> None:
    tool = UnitExecution("run", Consumption(tool_duration_s=2.0))
    estimates = EstimateCache(GRAPHS, ENGINE.unit_seconds, walks=200)
    cluster = ClusterSpec(ENGINE, warmup_s=container_warmup, prewarm_knob=0.9)
    result = simulate([make_run("A", 0.0, ask(400), tool)], GRAPHS, build_order("fcfs"), cluster, estimates)
    assert result.prewarm.started == 0
    assert result.outcomes[0].finished_s == pytest.approx(seconds(400) + 1.5 + 2.0)


def test_vtc_serves_the_client_with_less_service_first() -> None:
    # A's client has had service already when B and C, of one client, and D, of a fresh one, wait.
    runs = [make_run("A", 0.0, ask(200)), make_run("B", 0.01, ask(10)), make_run("D", 0.02, ask(10))]
    runs[1] = AppRun("B", "toy", 0.01, (ask(10),), client="A")
    finish = finish_times("vtc", runs)
    assert finish["D"] < finish["B"]


def test_deadlines_edf_serves_the_earlier_deadline_and_attainment_counts_it() -> None:
    runs = [make_run("A", 0.0, ask(200), deadline_s=100.0), make_run("B", 0.01, ask(400), deadline_s=100.0),
            make_run("C", 0.02, ask(400), deadline_s=seconds(200) + seconds(400) + 0.1)]
    estimates = EstimateCache(GRAPHS, ENGINE.unit_seconds, walks=200)
    result = simulate(runs, GRAPHS, build_order("edf"), ClusterSpec(ENGINE), estimates)
    finish = {o.run.run_id: o.finished_s for o in result.outcomes}
    assert finish["C"] < finish["B"]
    assert result.deadline_attainment() == 1.0
    assert result.deadline_attainment({"C"}) == 1.0


def test_an_unknown_order_or_unit_is_refused_by_name() -> None:
    with pytest.raises(InvalidField, match="order"):
        build_order("random")
    with pytest.raises(InvalidField, match="estimates"):
        build_order("gittins")
    with pytest.raises(InvalidField, match=r"runs\.X\.steps\[0\]\.unit"):
        simulate([AppRun("X", "toy", 0.0, (UnitExecution("nope", Consumption()),))], GRAPHS, build_order("fcfs"),
                 ClusterSpec(ENGINE))


def test_every_run_finishes_and_acts_are_positive() -> None:
    finish = finish_times("atlas", BLOCKED)
    assert all(not math.isnan(value) and value > 0 for value in finish.values())
