from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks import run_benchmark


def test_bros_benchmark_writes_its_table_and_plots(tmp_path, capsys) -> None:
    status = run_benchmark("bros", ["--rates", "1", "--duration", "4", "--be-batch", "4",
                                    "--out", str(tmp_path)])
    assert status == 0
    table = (tmp_path / "table.md").read_text()
    assert "### BROS side by side" in table and "| fcfs | 1 |" in table and "| round-robin | mean |" in table
    assert "RT lengths: sharegpt" in table
    for name in ("normalized_latency", "be_throughput", "ttft_attainment", "tpot_attainment"):
        assert (tmp_path / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    assert "### Per run" in capsys.readouterr().out


def test_sim_benchmark_reports_speed(tmp_path) -> None:
    assert run_benchmark("sim", ["--requests", "30", "--engines", "2", "--out", str(tmp_path)]) == 0
    rows = (tmp_path / "table.md").read_text().splitlines()
    assert rows[-1].startswith("| Azure conv (llama-13b-a100) | 30 | 2 | least_load |")
    assert rows[-1].endswith("| 0 | 0 |")  # nothing left unfinished, nothing refused


def test_rank_refresh_benchmark_times_re_ranking_against_re_estimating(tmp_path) -> None:
    assert run_benchmark("rank-refresh", ["--runs", "5", "20", "--walks", "100", "--refreshes", "3",
                                          "--out", str(tmp_path)]) == 0
    rows = [row.split("|")[1:-1] for row in (tmp_path / "results.md").read_text().splitlines() if row.startswith("| ")]
    assert [cells[0].strip() for cells in rows[1:]] == ["5", "20"]
    for cells in rows[1:]:
        per_run_us, re_estimate_ms = float(cells[2]), float(cells[3])
        assert per_run_us / 1000 < re_estimate_ms  # Eq. 1 from a kept estimate beats a fresh Monte Carlo walk
    assert (tmp_path / "rerank.png").read_bytes()[:4] == b"\x89PNG"


def test_overload_benchmark_soaks_both_configurations_and_plots_memory(tmp_path) -> None:
    assert run_benchmark("overload", ["--quick", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "table.md").read_text()
    assert "| baseline | RT |" in table and "| shed BE first | BE |" in table
    rows = [row.split("|")[1:-1] for row in table.splitlines() if row.startswith("| shed BE first | RT |")
            or row.startswith("| shed BE first | BE |")]
    for cells in rows:
        sent, completed, refused, with_retry_info, other = (int(cell) for cell in cells[2:7])
        assert sent == completed + refused + other and refused == with_retry_info  # every refusal says when to retry
        assert other == 0
    assert (tmp_path / "memory.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "rt_attainment.png").read_bytes()[:4] == b"\x89PNG"
    assert "RT SLO attainment of the requests sent in each twelfth of the soak" in table
    split = [row.split("|")[1:-1] for row in table.splitlines() if row.startswith("| shed BE first | 0")]
    assert split, "the shed run's RT TTFT is split between the scheduler and the worker"
    wait_s, worker_s, within = (float(cell) for cell in split[0][1:4])
    assert 0 <= wait_s < worker_s and 0 <= within <= 1  # shed first, RT hardly waits at the scheduler


def test_rt_arrivals_benchmark_shows_the_arrival_guard_keeping_more_ttft_objectives(tmp_path) -> None:
    assert run_benchmark("rt-arrivals", ["--quick", "--out", str(tmp_path)]) == 0
    rows = {cells[1].strip(): cells for row in (tmp_path / "table.md").read_text().splitlines()
            if row.startswith("| 16 |") for cells in [row.split("|")[1:-1]]}
    unguarded, guarded = rows["none"], rows["0.333 of the objective"]
    assert float(guarded[2]) > float(unguarded[2])  # more RT first tokens within the objective
    assert float(guarded[3]) < float(unguarded[3])  # a shorter mean TTFT


@pytest.mark.parametrize("flag", [["--shares", "0.5,0"], ["--shares", "half"], ["--be-in-flight", "-1"],
                                  ["--rt-rate", "0"]])
def test_rt_arrivals_benchmark_refuses_bad_settings_naming_the_flag(flag, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        run_benchmark("rt-arrivals", [*flag, "--out", str(tmp_path)])
    assert exit_.value.code == 2 and flag[0] in capsys.readouterr().err


def test_ssjf_benchmark_refuses_a_negative_continuous_request_count_naming_the_flag(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        run_benchmark("ssjf", ["--continuous-requests", "-1", "--out", str(tmp_path)])
    assert exit_.value.code == 2 and "--continuous-requests" in capsys.readouterr().err


def test_overload_prompts_share_no_first_block_within_or_across_phases() -> None:
    from benchmarks.overload import request_of

    prompts = [request_of(phase, number, False, 32, 0.0).token_ids.ids for phase in (0, 1, 2) for number in range(1, 4_000)]
    assert len({tuple(prompt[:16]) for prompt in prompts}) == len(prompts)


def test_router_memory_benchmark_shows_every_router_holding_a_bounded_state(tmp_path) -> None:
    # 6,000 requests at 10/s: 600 s, more than three of E2's 180 s windows
    assert run_benchmark("router-memory", ["--requests", "6000", "--rate", "10", "--checkpoints", "4",
                                           "--out", str(tmp_path)]) == 0
    rows = {cells[0].strip(): cells for row in (tmp_path / "results.md").read_text().splitlines()
            if row.startswith("| ") and not row.startswith("| router") and not row.startswith("|---")
            for cells in [row.split("|")[1:-1]]}
    assert set(rows) == {"e2", "round_robin", "least_load", "cache_aware", "kv_cost", "weighted"}
    assert float(rows["e2"][3]) < 1.05  # past the window E2 holds what it held at half the stream
    assert float(rows["cache_aware"][3]) > 1.5  # its routed-prompt tree grows until max_tree_size
    assert (tmp_path / "memory.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("flag", [["--routers", "e2,nearest"], ["--requests", "0"], ["--rate", "-1"]])
def test_router_memory_benchmark_refuses_bad_settings_naming_the_flag(flag, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        run_benchmark("router-memory", [*flag, "--out", str(tmp_path)])
    assert exit_.value.code == 2 and flag[0] in capsys.readouterr().err


def entry_point(name: str) -> Callable[[list[str]], int]:
    """Benchmark ``name``'s main; ``calibrate`` and ``bare-relay`` are commands of their own."""
    if name == "calibrate":
        from forethought.calibrate_runner import main as calibrate

        return calibrate
    if name == "bare-relay":
        from benchmarks.bare_relay import main as relay

        return relay
    return lambda argv: run_benchmark(name, argv)


# Each refused before any work: no trace read, no Redis, mesh or engine started (else a traceback, an
# empty run with status 0, or minutes of work first). ``{tmp}`` is the test's folder, holding a file ``file``.
BAD_SETTINGS = [
    ("bare-relay", ["--port", "0", "--worker", "127.0.0.1:1"], "--port"),
    ("bare-relay", ["--port", "5000", "--worker", "nohost"], "--worker"),
    ("bros", ["--rates", "0"], "--rates"),
    ("bros", ["--profile", "no-such-profile"], "--profile"),
    ("e2", ["--rates", "abc", "--quick"], "--rates"),
    ("e2", ["--routers", "foo"], "--routers"),
    ("e2", ["--engines", "0"], "--engines"),
    ("e2", ["--requests", "0"], "--requests"),
    ("e2", ["--workloads", "toolprompt,nope"], "--workloads"),
    ("e2", ["--e2-rebalance-thresholds", "1.5,x"], "--e2-rebalance-thresholds"),
    ("e2", ["--mooncake", "{tmp}/missing.jsonl"], "--mooncake"),
    ("hermes", ["--runs", "0"], "--runs"),
    ("hermes", ["--knobs", "off,1.5"], "--knobs"),
    ("hermes", ["--runs", "1000000"], "--runs"),  # more runs than the trace has requests
    ("http", ["--max-tokens", "0"], "--max-tokens"),
    ("http", ["--calls", "1"], "--calls"),
    ("overload", ["--rt-share", "1.5"], "--rt-share"),
    ("overload", ["--max-queue", "4", "--max-queue-best-effort", "8"], "--max-queue-best-effort"),
    ("placement", ["--decisions", "0"], "--decisions"),
    ("placement", ["--routers", "e2,nope"], "--routers"),
    ("placement", ["--service-routers", "nope"], "--service-routers"),
    ("placement", ["--calls", "2", "--clients", "3"], "--calls"),
    ("placement", ["--moderate-calls", "1"], "--moderate-calls"),
    ("rank-refresh", ["--runs", "10", "0"], "--runs"),
    ("rank-refresh", ["--walks", "0"], "--walks"),
    ("router-memory", ["--requests", "4", "--checkpoints", "5"], "--checkpoints"),
    ("rt-arrivals", ["--rt-rate", "inf"], "--rt-rate"),
    ("rt-arrivals", ["--profile", "no-such-profile"], "--profile"),
    ("samullm", ["--out", "{tmp}/file/results"], "--out"),
    ("sim", ["--requests", "-1"], "--requests"),
    ("sim", ["--router", "nope"], "--router"),
    ("ssjf", ["--loads", "abc"], "--loads"),
    ("ssjf", ["--max-batch", "0"], "--max-batch"),
    ("worker-overhead", ["--concurrency", "1", "0"], "--concurrency"),
    ("worker-overhead", ["--kv-cache-gib", "0"], "--kv-cache-gib"),
    ("calibrate", ["--repeats", "-1"], "--repeats"),
    ("calibrate", ["--tp", "0"], "--tp"),
    ("calibrate", ["--out", "{tmp}/file/profile.json"], "--out"),  # a file where its folder would be made
    ("calibrate", ["--out", "{tmp}"], "--out"),
]


@pytest.mark.parametrize(("name", "argv", "flag"), BAD_SETTINGS, ids=[f"{n} {' '.join(a)}" for n, a, _ in BAD_SETTINGS])
def test_a_bad_setting_is_refused_naming_its_flag_before_any_work(name: str, argv: list[str], flag: str,
                                                                   tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    output = [] if name in ("calibrate", "bare-relay") else ["--out", str(tmp_path / "out")]  # a later --out wins
    with pytest.raises(SystemExit) as exit_:
        entry_point(name)([*output, *argv])
    assert exit_.value.code == 2 and f"argument {flag}:" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_worker_overhead_variant_is_refused_naming_the_flag_before_any_engine_starts(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:  # reads vLLM's options, which loads vLLM (seconds), and starts nothing
        run_benchmark("worker-overhead", ["--variant", "default", "max_num_seqs=many", "--out", str(tmp_path)])
    assert exit_.value.code == 2 and "argument --variant: max_num_seqs=many:" in capsys.readouterr().err
