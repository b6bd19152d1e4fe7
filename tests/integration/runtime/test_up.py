"""`forethought up` in a clean environment: comes up, serves `generate`, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import grpc
import psutil
import pytest
from forethought.cluster.ports import free_port, free_port_block
from forethought.cluster.redis_server import start_redis
from forethought.launcher import Cluster, tie_to_launcher
from forethought.predict.shipped import SHIPPED_DIR
from forethought.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc


def start_up(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """Runs ``forethought up ARGS`` and returns once it printed its ready line."""
    up = subprocess.Popen([sys.executable, "-m", "forethought.cli", "up", *args],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output: list[str] = []
    for line in up.stdout:
        output.append(line)
        if line.startswith("ready in"):
            time.sleep(1.0)  # the scheduler's next registry read adopts the workers
            return up
    up.wait()
    raise AssertionError("forethought up exited before it was ready:\n" + "".join(output))


def generate(text: str, base: int, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forethought.cli", "generate", text, "--max-tokens", "8", "--scheduler", f"127.0.0.1:{base}", *flags],
        capture_output=True, text=True, timeout=120, env=env,
    )


def stop(up: subprocess.Popen[str]) -> str:
    """Ctrl-C, as a person would; returns what up printed while stopping."""
    up.send_signal(signal.SIGINT)
    rest, _ = up.communicate(timeout=120)
    return rest


def still_running(processes: list[psutil.Process]) -> list[list[str]]:
    time.sleep(0.5)
    return [process.cmdline() for process in processes if process.is_running() and process.status() != psutil.STATUS_ZOMBIE]


def test_up_generate_status_and_ctrl_c_leaves_no_process(tmp_path: Path):
    base = free_port_block(20)
    env = {**os.environ, "FORETHOUGHT_STATE_DIR": str(tmp_path)}
    up = start_up(["--engine", "sim", "--base-port", str(base), "--http-port", str(base + 5), "--sim-speedup", "5"], env)
    try:
        children = psutil.Process(up.pid).children(recursive=True)
        assert len(children) >= 8  # redis, tokenizer, demand, planner, 2 workers, scheduler, http (+ predictor if trained)
        generated = generate("Tell me about the Moon", base, env)
        assert generated.returncode == 0, generated.stderr
        assert "[8 tokens;" in generated.stdout
        assert "not text" in generated.stdout  # the sim engine says its tokens are no answer
        found = subprocess.run([sys.executable, "-m", "forethought.cli", "generate", "Hi", "--max-tokens", "3"],
                               capture_output=True, text=True, timeout=120, env=env)
        assert found.returncode == 0 and "[3 tokens;" in found.stdout, found.stderr  # at the address up recorded
        status = subprocess.run([sys.executable, "-m", "forethought.cli", "status"], capture_output=True, text=True, timeout=60, env=env)
        assert status.returncode == 0, status.stdout + status.stderr
        assert status.stdout.count("SERVING") >= 7
        assert re.search(rf"http +127.0.0.1:{base + 5} +SERVING", status.stdout), status.stdout
        with urllib.request.urlopen(f"http://127.0.0.1:{base + 5}/v1/models", timeout=10) as models:
            assert [model["id"] for model in json.load(models)["data"]] == ["SmolLM2-135M-Instruct"]
        assert "worker-1" in status.stdout
        assert "sim workers make token ids for load tests, not text" in status.stdout
    finally:
        rest = stop(up)
    assert up.returncode == 0, rest
    assert still_running(children) == []
    assert not (tmp_path / "up.json").exists()


@pytest.mark.slow
def test_up_with_the_vllm_engine_serves_real_text_through_the_mesh(tmp_path: Path):
    base = free_port_block(20)
    env = {**os.environ, "FORETHOUGHT_STATE_DIR": str(tmp_path)}
    up = start_up(["--base-port", str(base), "--http-port", str(base + 5)], env)  # the default: one vLLM worker
    try:
        descendants = psutil.Process(up.pid).children(recursive=True)
        assert any("EngineCore" in " ".join(process.cmdline()) for process in descendants)
        generated = generate("What is the capital of France?", base, env)  # a chat turn
        assert generated.returncode == 0, generated.stderr
        assert "Paris" in generated.stdout
        raw = generate("The capital of France is", base, env, "--raw")
        assert raw.returncode == 0 and "Paris" in raw.stdout, raw.stdout + raw.stderr
        plain = streamed_text(base, [])
        assert len(plain) > 26, plain
        # vLLM holds text back while a stop string may match: the stream must not fill the gap twice.
        cut = plain[6:26]
        assert streamed_text(base, [cut]) == plain[:plain.index(cut)]
        assert streamed_text(base, ["z" * 40]) == plain
    finally:
        rest = stop(up)
    assert up.returncode == 0, rest
    assert still_running(descendants) == []


def streamed_text(base: int, stop_strings: list[str]) -> str:
    """The text Generate streams for a greedy answer to a fixed prompt, with these stop strings."""
    request = scheduler_pb2.GenerateRequest(
        model="SmolLM2-135M-Instruct", text="The capital of France is", max_tokens=16, return_text=True,
        sampling=common_pb2.SamplingParams(temperature=0.0, stop=stop_strings),
    )
    with grpc.insecure_channel(f"127.0.0.1:{base}") as channel:
        replies = scheduler_pb2_grpc.SchedulerServiceStub(channel).Generate(request, timeout=60)
        return "".join(reply.text for reply in replies)


_ORPHANS_A_CHILD = "import subprocess; print(subprocess.Popen(['sleep', '300']).pid, flush=True)"
_IGNORES_SIGTERM = "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(os.getpid(), flush=True); time.sleep(300)"


def test_stop_takes_a_service_that_ignores_sigterm_and_what_a_service_left_behind():
    cluster = Cluster(redis=start_redis(preexec_fn=tie_to_launcher))
    printed_pids = {}  # printing also says the process is ready
    for name, code in (("orphaner", _ORPHANS_A_CHILD), ("stubborn", _IGNORES_SIGTERM)):
        cluster.processes[name] = subprocess.Popen([sys.executable, "-c", code], preexec_fn=tie_to_launcher,
                                                   stdout=subprocess.PIPE, text=True)
        printed_pids[name] = int(cluster.processes[name].stdout.readline())
    orphan = psutil.Process(printed_pids["orphaner"])
    cluster.processes["orphaner"].wait(10)  # its parent is gone; the sleep lives on in its group
    assert orphan.is_running()
    started = time.monotonic()
    cluster.stop(grace_s=1.0)
    assert time.monotonic() - started < 5.0
    assert still_running([orphan]) == []
    assert cluster.processes["stubborn"].returncode == -signal.SIGKILL


def ignoring_stop_signals() -> None:
    """Before exec: SIGINT and SIGTERM ignored, as a script's background job inherits SIGINT, and worse."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)


def wait_for_descendant(up: subprocess.Popen[str], marker: str, timeout_s: float = 120) -> list[psutil.Process]:
    """Every process under ``up`` once one of them has ``marker`` in its command line."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        descendants = psutil.Process(up.pid).children(recursive=True)
        with contextlib.suppress(psutil.NoSuchProcess):
            if any(marker in " ".join(process.cmdline()) for process in descendants):
                return descendants
        time.sleep(0.05)
    raise AssertionError(f"no process with {marker!r} under forethought up within {timeout_s:.0f} s")


@pytest.mark.parametrize(("engine", "signum", "mid_start"), [
    ("sim", signal.SIGINT, "--worker-id worker-1"),
    ("sim", signal.SIGTERM, "--worker-id worker-1"),
    pytest.param("vllm", signal.SIGINT, "EngineCore", marks=pytest.mark.slow),
], ids=["sim-SIGINT", "sim-SIGTERM", "vllm-SIGINT-while-the-engine-loads"])
def test_a_stop_during_start_up_stops_everything_whatever_signals_it_inherited(
        tmp_path: Path, engine: str, signum: int, mid_start: str):
    base = free_port_block(20)
    env = {**os.environ, "FORETHOUGHT_STATE_DIR": str(tmp_path)}
    up = subprocess.Popen([sys.executable, "-m", "forethought.cli", "up", "--engine", engine, "--base-port", str(base),
                           "--http-port", str(base + 5)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          preexec_fn=ignoring_stop_signals)
    try:
        descendants = wait_for_descendant(up, mid_start)
        up.send_signal(signum)
        output, _ = up.communicate(timeout=30)
    finally:
        if up.poll() is None:
            up.kill()
    assert "ready in" not in output and f"stopped during start-up ({signal.Signals(signum).name})" in output, output
    assert up.returncode == 0
    assert still_running(descendants) == []


def test_a_service_that_cannot_start_ends_up_in_one_line_and_leaves_nothing(tmp_path: Path):
    # a predictor whose config reads but whose weights are cut short: up cannot tell until the predictor loads them
    cut = tmp_path / "cut-predictor"
    shutil.copytree(SHIPPED_DIR, cut)
    weights = cut / "backbone.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    base = free_port_block(20)
    env = {**os.environ, "FORETHOUGHT_STATE_DIR": str(tmp_path)}
    up = subprocess.run([sys.executable, "-m", "forethought.cli", "up", "--engine", "sim", "--base-port", str(base),
                         "--http-port", str(base + 5), "--predictor-model", str(cut)],
                        capture_output=True, text=True, timeout=120, env=env)
    assert up.returncode == 1
    assert "Traceback" not in up.stdout + up.stderr
    assert "forethought up: predictor exited during start-up; its log above says why; stopped everything" in up.stderr
    # the service's own line
    assert (f"forethought predictor: cannot start: invalid setting --model-dir / FORETHOUGHT_MODEL_DIR = '{cut}': must hold "
            f"a predictor that loads: the predictor in {cut} does not load (SafetensorError: ") in up.stdout + up.stderr
    assert not (tmp_path / "up.json").exists()


@pytest.mark.parametrize(("flags", "environment", "line"), [
    (["--router", "nearest"], {},
     "forethought up: scheduler: invalid setting --router / FORETHOUGHT_ROUTER = 'nearest': must be one of e2, "),
    (["--sim-speedup", "0"], {}, "forethought up: error: argument --sim-speedup: must be a number above 0, not 0"),
    (["--workers", "0"], {}, "forethought up: error: argument --workers: must be 1 or more, not 0"),
    ([], {"FORETHOUGHT_MAX_QUEUE": "0"},
     "forethought up: scheduler: invalid setting --max-queue / FORETHOUGHT_MAX_QUEUE = 0: must be >= 1"),
    ([], {"FORETHOUGHT_METRICS_PORT": "9100"},
     "forethought up: --metrics-port / FORETHOUGHT_METRICS_PORT = 9100 would be the metrics port of 8 services (tokenizer, "
     "predictor, demand, planner, worker-0, worker-1, scheduler, http); a port serves one process: set 0"),
], ids=["router", "sim-speedup", "workers", "a service's environment", "one metrics port for all"])
def test_a_setting_a_service_would_refuse_stops_up_before_it_starts_anything(
        tmp_path: Path, flags: list[str], environment: dict[str, str], line: str):
    env = {**os.environ, "FORETHOUGHT_STATE_DIR": str(tmp_path), **environment}
    up = subprocess.run([sys.executable, "-m", "forethought.cli", "up", "--engine", "sim", *flags],
                        capture_output=True, text=True, timeout=60, env=env)
    assert up.returncode == 2
    assert "starting Redis" not in up.stdout
    assert "Traceback" not in up.stderr
    assert up.stderr.splitlines()[-1].startswith(line)


def test_a_predictor_folder_without_a_predictor_is_refused_in_one_line(tmp_path: Path):
    env = {**os.environ, "FORETHOUGHT_STATE_DIR": str(tmp_path)}
    up = subprocess.run([sys.executable, "-m", "forethought.cli", "up", "--engine", "sim", "--predictor-model", str(tmp_path)],
                        capture_output=True, text=True, timeout=60, env=env)
    assert up.returncode == 2
    assert up.stderr == f"forethought up: --predictor-model: no trained predictor in {tmp_path}: `forethought train-predictor` trains one\n"


def test_ports_another_process_holds_stop_up_before_it_starts_anything(tmp_path: Path):
    import socket

    base = free_port_block(20)
    env = {**os.environ, "FORETHOUGHT_STATE_DIR": str(tmp_path)}
    with socket.socket() as tokenizer_port, socket.socket() as http_port:
        for holder, port in ((tokenizer_port, base + 1), (http_port, base + 5)):
            holder.bind(("127.0.0.1", port))
            holder.listen()
        up = subprocess.run([sys.executable, "-m", "forethought.cli", "up", "--engine", "sim", "--base-port", str(base),
                             "--http-port", str(base + 5)], capture_output=True, text=True, timeout=60, env=env)
    assert up.returncode == 1
    assert "starting Redis" not in up.stdout
    assert up.stderr == (f"forethought up: cannot listen on tokenizer's port {base + 1} (--base-port): Address already in use; "
                         f"http's port {base + 5} (--http-port): Address already in use. Another forethought up may be "
                         "running (forethought status shows it): stop it, or pass other ports\n")


def test_generate_with_nothing_at_the_scheduler_address_says_how_to_start_the_mesh():
    address = f"127.0.0.1:{free_port()}"
    result = subprocess.run([sys.executable, "-m", "forethought.cli", "generate", "hi", "--scheduler", address],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.startswith("\nforethought generate: UNAVAILABLE: ")
    assert result.stderr.endswith(f"nothing listens at {address}: start the mesh with `forethought up` (`forethought "
                                  "status` shows what runs), or name the scheduler with --scheduler\n")


@pytest.mark.parametrize(("command", "argument"), [
    (["forethought.cli", "generate", "hi", "--tls-ca"], "--tls-ca"),
    (["forethought.cli", "app", "run"], "file"),
    (["forethought.cli", "train-predictor", "--castillo"], "--castillo"),
    (["forethought.predict.evaluate", "--castillo"], "--castillo"),
], ids=["generate --tls-ca", "app run", "train-predictor --castillo", "evaluate --castillo"])
def test_a_missing_input_file_is_named_in_one_line_before_any_work(tmp_path: Path, command: list[str], argument: str):
    missing = str(tmp_path / "missing.yaml")
    result = subprocess.run([sys.executable, "-m", *command, missing], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].endswith(f"error: argument {argument}: {missing}: no such file")
    assert "Traceback" not in result.stderr
