"""`forethought up` in a clean environment: comes up, serves `generate`, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import psutil
import pytest

from forethought.cluster.redis_server import free_port, start_redis
from forethought.launcher import Cluster, tie_to_launcher
from forethought.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc


def free_port_block(size: int) -> int:
    """A base port whose next ``size`` ports were free a moment ago."""
    for _ in range(50):
        base = free_port()
        if base + size < 65535 and all(_is_free(base + offset) for offset in range(size)):
            return base
    raise RuntimeError("no free port block")


def _is_free(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


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


def generate(text: str, base: int, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forethought.cli", "generate", text, "--max-tokens", "8", "--scheduler", f"127.0.0.1:{base}"],
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
    up = start_up(["--workers", "2", "--base-port", str(base), "--sim-speedup", "5"], env)
    try:
        children = psutil.Process(up.pid).children(recursive=True)
        assert len(children) >= 7  # redis, tokenizer, demand, planner, 2 workers, scheduler (+ predictor if trained)
        generated = generate("Tell me about the Moon", base, env)
        assert generated.returncode == 0, generated.stderr
        assert "[8 tokens;" in generated.stdout
        status = subprocess.run([sys.executable, "-m", "forethought.cli", "status"], capture_output=True, text=True, timeout=60, env=env)
        assert status.returncode == 0, status.stdout + status.stderr
        assert status.stdout.count("SERVING") >= 6
        assert "worker-1" in status.stdout
    finally:
        rest = stop(up)
    assert up.returncode == 0, rest
    assert still_running(children) == []
    assert not (tmp_path / "up.json").exists()


@pytest.mark.slow
def test_up_with_the_vllm_engine_serves_real_text_through_the_mesh(tmp_path: Path):
    base = free_port_block(20)
    env = {**os.environ, "FORETHOUGHT_STATE_DIR": str(tmp_path)}
    up = start_up(["--workers", "1", "--engine", "vllm", "--base-port", str(base)], env)
    try:
        descendants = psutil.Process(up.pid).children(recursive=True)
        assert any("EngineCore" in " ".join(process.cmdline()) for process in descendants)
        generated = generate("The capital of France is", base, env)
        assert generated.returncode == 0, generated.stderr
        assert "Paris" in generated.stdout
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
