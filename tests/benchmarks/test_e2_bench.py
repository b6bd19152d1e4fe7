"""Smoke test of ``forethought bench e2``: a tiny tool-prompt run still compares every router."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from forethought.costmodel import get_profile
from forethought.domain import ServiceClass
from forethought.sim.config import build_simulator
from forethought.workloads.azure import azure_arrivals
from forethought.workloads.workload import TokenSegment, TraceRequest, Workload

from benchmarks.e2 import (
    BOUND,
    CONVERSATION_TRACE,
    E2_HISTORY_WINDOW_S,
    ROUTERS,
    RouterRun,
    Scenario,
    Traces,
    build_workload,
    cluster_config,
    contention_free_bound,
    conversation_trace,
    default_workloads,
    main,
    router_runs,
    run_one,
    synthetic_mooncake_records,
    with_service_class,
)


def table_rows(table: str, title: str) -> list[list[str]]:
    section = table.split(f"### {title}\n", 1)[1].split("###", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]  # past the header
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def test_a_small_run_reports_every_router_with_hit_ratios_below_the_ideal(tmp_path: Path) -> None:
    status = main(["--requests", "40", "--engines", "2", "--workloads", "toolprompt", "--rates", "4",
                   "--out", str(tmp_path)])
    assert status == 0
    table = (tmp_path / "table.md").read_text()
    rows = table_rows(table, "toolprompt, 4/s per engine, 2 engines")
    assert [row[0] for row in rows] == [*ROUTERS, BOUND]
    routers, bound = rows[:-1], rows[-1]
    for row in routers:
        assert int(row[1]) == 40  # every request completed
        hit_ratio, ideal = float(row[6]), float(row[7])
        assert 0.0 < hit_ratio <= ideal <= 1.0
        assert float(bound[2]) < float(row[2]) and float(bound[3]) <= float(row[3])  # no router beats the bound
        excess_ttft, excess_after = (float(x) for x in row[10].split(" / "))
        assert excess_ttft >= 0 and excess_after > 0
    round_robin = next(row for row in rows if row[0] == "round_robin")
    assert round_robin[8:10] == ["1.00x", "1.00x"]
    summary = table_rows(table, "Summary")[0]
    assert summary[:3] == ["toolprompt", "4", "2"]
    assert summary[9] == f"{float(round_robin[2]) / float(bound[2]):.2f}x / {float(round_robin[3]) / float(bound[3]):.2f}x"
    assert (tmp_path / "latency_toolprompt_2.png").read_bytes()[:4] == b"\x89PNG"


def test_router_runs_give_e2_one_run_per_threshold_and_the_baselines_one() -> None:
    runs = router_runs(["e2", "round_robin"], [1.15, 15.0])
    assert [run.label for run in runs] == ["e2 Th_bal=1.15", "e2 Th_bal=15", "round_robin"]
    assert [run.options.get("rebalance_threshold") for run in runs] == [1.15, 15.0, None]
    assert all(run.options["history_window_s"] == E2_HISTORY_WINDOW_S for run in runs[:2])
    assert router_runs(["e2"], [], 60.0)[0].options["history_window_s"] == 60.0
    assert [run.label for run in router_runs(["e2"], [])] == ["e2"]


def test_a_threshold_sweep_writes_one_sensitivity_row_per_threshold(tmp_path: Path) -> None:
    status = main(["--requests", "40", "--engines", "2", "--workloads", "toolprompt", "--rates", "4",
                   "--routers", "e2,weighted", "--e2-rebalance-thresholds", "1.5,1e9", "--out", str(tmp_path)])
    assert status == 0
    table = (tmp_path / "table.md").read_text()
    sensitivity = table_rows(table, "Th_bal sensitivity")
    assert [row[3] for row in sensitivity] == ["1.5", "1e+09"]
    assert {row[8] for row in sensitivity} == {"weighted"}  # the best non-E2 router, round-robin aside
    runs = table_rows(table, "toolprompt, 4/s per engine, 2 engines")
    assert [row[0] for row in runs] == ["e2 Th_bal=1.5", "e2 Th_bal=1e+09", "weighted", "round_robin", BOUND]
    assert all(int(row[1]) == 40 for row in runs)


def test_azure_tool_serves_the_tool_prompts_at_the_azure_code_arrivals(tmp_path: Path) -> None:
    traces = Traces(mooncake=None, data_dir=None)
    tools = build_workload(Scenario("toolprompt", 4.0), 2, 60, traces, seed=3)
    azure = build_workload(Scenario("azure-tool", 4.0), 2, 60, traces, seed=3)
    assert [r.prompt for r in azure.requests] == [r.prompt for r in tools.requests]
    assert [r.arrival_s for r in azure.requests] == list(azure_arrivals("code", 60, 8.0))
    status = main(["--requests", "40", "--engines", "2", "--workloads", "azure-tool", "--rates", "4",
                   "--routers", "e2,weighted", "--out", str(tmp_path)])
    assert status == 0
    rows = table_rows((tmp_path / "table.md").read_text(), "azure-tool, 4/s per engine, 2 engines")
    assert [(row[0], int(row[1])) for row in rows] == [("e2", 40), ("weighted", 40), ("round_robin", 40), (BOUND, 40)]


def write_trace(path: Path, count: int) -> Path:
    """A small trace in Mooncake's format (the synthetic generator's records at 1 request/s)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in synthetic_mooncake_records(count, 1.0, seed=5)))
    return path


def test_the_real_trace_runs_by_default_when_the_data_directory_holds_it(tmp_path: Path) -> None:
    assert conversation_trace(None, tmp_path) is None
    assert default_workloads(Traces(None, tmp_path)) == ["mooncake", "sharegpt", "toolprompt", "azure-tool"]
    trace = write_trace(tmp_path / CONVERSATION_TRACE, 5)
    assert conversation_trace(None, tmp_path) == trace
    assert conversation_trace(tmp_path / "other.jsonl", tmp_path) == tmp_path / "other.jsonl"
    assert default_workloads(Traces(trace, tmp_path)) == ["mooncake-trace", "sharegpt", "toolprompt", "azure-tool"]


def test_each_rate_of_the_real_trace_is_a_different_load_on_engines_of_the_stated_capacity(tmp_path: Path) -> None:
    traces = Traces(write_trace(tmp_path / "trace.jsonl", 30), tmp_path)
    slow, fast = (build_workload(Scenario("mooncake-trace", rate), 2, 30, traces, seed=0) for rate in (0.5, 2.0))
    assert [r.prompt for r in slow.requests] == [r.prompt for r in fast.requests]  # the trace's own requests
    assert slow.requests[-1].arrival_s == pytest.approx(4 * fast.requests[-1].arrival_s)
    assert slow.requests[-1].arrival_s == pytest.approx(30 / 1.0)  # 30 requests at 2 x 0.5/s
    run = RouterRun("e2", "e2", {})
    real = cluster_config(Scenario("mooncake-trace", 0.5), 2, run).engine_config()
    synthetic = cluster_config(Scenario("mooncake", 2.0), 2, run).engine_config()
    assert real.num_blocks * real.block_size == get_profile("llama-7b-a100").kv_capacity_tokens // 16 * 16
    assert synthetic.num_blocks == 4096
    for scenario in (Scenario("mooncake-trace", 0.5), Scenario("mooncake", 2.0)):  # a stated capacity wins for both
        assert cluster_config(scenario, 2, run, kv_capacity_tokens=892_928).engine_config().num_blocks == 55_808


def test_a_stated_kv_capacity_is_the_engines_and_refuses_what_they_cannot_hold(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "trace.jsonl", 150)  # prompts of 1,088-3,583 tokens
    status = main(["--quick", "--mooncake", str(trace), "--workloads", "mooncake-trace", "--routers", "e2",
                   "--rates", "0.2", "--kv-capacity-tokens", "2048", "--out", str(tmp_path / "out")])
    assert status == 0
    table = (tmp_path / "out" / "table.md").read_text()
    assert "128 KV blocks of 16 tokens per engine (--kv-capacity-tokens)" in table
    done = {row[0]: int(row[1]) for row in table_rows(table, "mooncake-trace, 0.2/s per engine, 4 engines")}
    assert 0 < done["e2"] < 100  # the longer prompts are refused
    assert done["e2"] == done["round_robin"] == done[BOUND]
    with pytest.raises(SystemExit):
        main(["--kv-capacity-tokens", "8", "--out", str(tmp_path / "refused")])


def test_a_quick_run_of_the_real_trace_reports_a_table_per_rate(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "trace.jsonl", 150)
    status = main(["--quick", "--mooncake", str(trace), "--workloads", "mooncake-trace", "--routers", "e2",
                   "--out", str(tmp_path / "out")])
    assert status == 0
    table = (tmp_path / "out" / "table.md").read_text()
    means = []
    for rate in ("0.05", "0.1", "0.2"):
        rows = table_rows(table, f"mooncake-trace, {rate}/s per engine, 4 engines")
        assert [(row[0], int(row[1])) for row in rows] == [("e2", 100), ("round_robin", 100), (BOUND, 100)]  # --quick
        means.append(float(rows[1][2]))
    assert len(set(means)) == 3  # three loads, three different round-robin latencies


def test_the_bound_serves_each_request_alone_with_every_earlier_prefix_cached() -> None:
    shared = TokenSegment("tool", 1, 1024)
    first = TraceRequest("first", 0.0, (shared, TokenSegment("query", 1, 100)), output_tokens=50)
    second = TraceRequest("second", 0.0, (shared, TokenSegment("query", 2, 100)), output_tokens=50)
    config = cluster_config(Scenario("toolprompt", 4.0), 2, RouterRun("round_robin", "round_robin", {}))
    bound = contention_free_bound(Workload(requests=(first, second)), config)
    together = build_simulator(Workload(requests=(first, second)), replace(config, engines=1)).run()
    for record in together.records:  # served side by side, each takes longer than alone
        assert record.jct_s > bound[record.request_id].jct_s
    alone = build_simulator(Workload(requests=(first,)), replace(config, engines=1)).run().records[0]
    assert bound["first"].jct_s == pytest.approx(alone.jct_s)
    assert bound["first"].cached_prompt_tokens == 0
    assert bound["second"].cached_prompt_tokens == 1024  # the first one's prefix, whole blocks
    assert bound["second"].ttft_s < bound["first"].ttft_s


def test_priority_groups_order_best_effort_requests_and_leave_real_time_ones_in_arrival_order() -> None:
    scenario = Scenario("toolprompt", 8.0)  # round-robin queues here, so each engine has requests to order
    workload = build_workload(scenario, 2, 120, Traces(None, None), 0)
    run = RouterRun("round_robin", "round_robin", {})

    def ttfts(service_class: ServiceClass, priority_groups: int) -> dict[str, float]:
        served = run_one(with_service_class(workload, service_class), scenario, 2, run, None, priority_groups)
        assert {record.service_class for record in served.records} == {service_class}
        return {record.request_id: record.ttft_s for record in served.records}

    assert ttfts(ServiceClass.RT, 10) == ttfts(ServiceClass.RT, 0)  # RT go by deadline: none here, so by arrival
    grouped, arrival = ttfts(ServiceClass.BE, 10), ttfts(ServiceClass.BE, 0)
    assert grouped != arrival
    assert sum(grouped.values()) < sum(arrival.values())  # well-cached prompts first: less prefill ahead of each
