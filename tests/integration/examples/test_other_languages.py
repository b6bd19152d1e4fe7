"""The doors from other languages, run as a user runs them against a live `forethought up --engine sim`:
the Node.js example in examples/node and the README's grpcurl commands, exactly as the README shows them.

The sim engine is fast and the tokenizer service is real, so the streams carry token ids and their text.
Missing node, npm or grpcurl fails these tests, never skips them: CI must run them.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from forethought.v1 import scheduler_pb2, scheduler_pb2_grpc

REPO = Path(__file__).resolve().parents[3]
MODEL = "SmolLM2-135M-Instruct"
WORKER_LINE = re.compile(rf"worker (worker-\d+) at 127\.0\.0\.1:\d+: {MODEL}, engine sim, WORKER_HEALTH_SERVING")
FINISH_LINE = re.compile(r"finish: FINISH_REASON_LENGTH; usage: 5 prompt tokens \(\d+ cached\), 16 output tokens")


def free_base_port(size: int = 20) -> int:
    """A base port of 52000 or more whose next ``size`` ports were free a moment ago."""
    def is_free(port: int) -> bool:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
        return True

    for _ in range(50):
        base = random.randrange(52000, 65000 - size)
        if all(is_free(base + offset) for offset in range(size)):
            return base
    raise RuntimeError(f"no block of {size} free ports at 52000 or above")


def tool_env() -> dict[str, str]:
    """The environment for the tools: this interpreter's bin folder first, where the dev extra puts grpcurl."""
    return {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}


def require_tool(name: str) -> str:
    path = shutil.which(name, path=tool_env()["PATH"])
    if path is None:
        pytest.fail(f"{name} is not on PATH: the examples test needs node and npm (Node.js 18 or newer) and grpcurl "
                    f"(`scripts/install --dev`); it fails rather than skips so CI never passes without running it")
    return path


def wait_for_workers(address: str, timeout_s: float = 20.0) -> None:
    """Until the scheduler lists a worker (it adopts them from the registry shortly after it serves)."""
    deadline = time.monotonic() + timeout_s
    with grpc.insecure_channel(address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        while time.monotonic() < deadline:
            if stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=5).workers:
                return
            time.sleep(0.2)
    raise AssertionError(f"the scheduler at {address} listed no worker within {timeout_s:.0f} s")


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`forethought up --engine sim` on free ports; yields the scheduler's address; Ctrl-C at the end."""
    state = tmp_path_factory.mktemp("up")
    base = free_base_port()
    log_path = state / "up.log"
    with log_path.open("w") as log:
        up = subprocess.Popen(
            [sys.executable, "-m", "forethought.cli", "up", "--engine", "sim", "--base-port", str(base), "--sim-speedup", "5"],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "FORETHOUGHT_STATE_DIR": str(state)})
    try:
        deadline = time.monotonic() + 120
        while not re.search(r"^ready in", log_path.read_text(), re.MULTILINE):
            if up.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"forethought up never got ready:\n{log_path.read_text()}")
            time.sleep(0.2)
        wait_for_workers(f"127.0.0.1:{base}")
        yield f"127.0.0.1:{base}"
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(60)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()


@pytest.fixture(scope="module")
def node_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/node copied beside a link to protos/ (the layout it loads them from), after `npm ci`."""
    npm = require_tool("npm")
    require_tool("node")
    checkout = tmp_path_factory.mktemp("checkout")
    example = checkout / "examples" / "node"
    shutil.copytree(REPO / "examples" / "node", example, ignore=shutil.ignore_patterns("node_modules"))
    (checkout / "protos").symlink_to(REPO / "protos")
    installed = subprocess.run([npm, "ci", "--cache", str(checkout / "npm-cache"), "--no-audit", "--no-fund"],
                               cwd=example, capture_output=True, text=True, timeout=180, env=tool_env())
    assert installed.returncode == 0, f"npm ci failed:\n{installed.stdout}{installed.stderr}"
    return example


def run_node(example: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_tool("node"), "client.js", *args], cwd=example, capture_output=True, text=True,
                          timeout=90, env={**tool_env(), **(env or {})})


def test_the_node_example_lists_the_workers_and_streams_an_answer(mesh: str, node_example: Path):
    run = run_node(node_example, mesh)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    workers = [match.group(1) for line in lines[:2] if (match := WORKER_LINE.fullmatch(line))]
    assert sorted(workers) == ["worker-0", "worker-1"], run.stdout
    assert re.fullmatch(r"\[served by worker-[01]\]", lines[2]), run.stdout
    # The sim engine's tokens are random text: the stream may open with line breaks.
    assert "".join(lines[3:-1]).strip(), "the streamed text is empty:\n" + run.stdout
    assert FINISH_LINE.fullmatch(lines[-1]), run.stdout
    assert run.stderr == ""


@pytest.mark.parametrize(("args", "env", "status"), [
    ((), {"FORETHOUGHT_MODEL": "no-such-model"}, "error: NOT_FOUND (5): model: no worker serves 'no-such-model'"),
    (("127.0.0.1:1",), {}, "error: UNAVAILABLE (14): "),
], ids=["unknown-model", "nothing-listening"])
def test_the_node_example_exits_1_with_the_grpc_status(mesh: str, node_example: Path, args: tuple[str, ...],
                                                       env: dict[str, str], status: str):
    run = run_node(node_example, *(args or (mesh,)), env=env)
    assert run.returncode == 1
    assert run.stderr.startswith(status), run.stderr


def readme_commands(marker: str) -> list[str]:
    """The commands of the README's fenced block after ``<!-- marker -->``, a backslash-continued one whole."""
    lines = (REPO / "README.md").read_text().splitlines()
    start = lines.index(f"<!-- {marker} -->") + 1
    assert lines[start].startswith("```"), f"no fenced block after <!-- {marker} --> in README.md"
    block = "\n".join(lines[start + 1:lines.index("```", start + 1)])
    return re.split(r"(?<!\\)\n", block)


def run_readme_command(command: str, address: str) -> str:
    assert command.count("localhost:50051") == 1, command
    require_tool("grpcurl")
    run = subprocess.run(["bash", "-c", command.replace("localhost:50051", address)], capture_output=True, text=True,
                         timeout=60, env=tool_env())
    assert run.returncode == 0, f"{command}\n{run.stdout}{run.stderr}"
    return run.stdout


def json_messages(text: str) -> list[dict[str, Any]]:
    """grpcurl prints a stream as JSON objects one after another."""
    decoder, messages, at = json.JSONDecoder(), [], 0
    text = text.strip()
    while at < len(text):
        message, at = decoder.raw_decode(text, at)
        messages.append(message)
        at = len(text) - len(text[at:].lstrip())
    return messages


def test_the_readme_grpcurl_commands_list_describe_and_stream_a_generate(mesh: str):
    listing, description, generation = readme_commands("example:grpcurl")
    assert run_readme_command(listing, mesh).splitlines() == [
        "forethought.v1.SchedulerService", "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"]
    assert ("rpc Generate ( .forethought.v1.GenerateRequest ) returns ( stream .forethought.v1.GenerateResponse );"
            in run_readme_command(description, mesh))
    messages = json_messages(run_readme_command(generation, mesh))
    first, last = messages[0], messages[-1]
    assert re.fullmatch(r"worker-[01]", first["worker_id"]) and first["predicted_output_tokens"] > 0, first
    assert sum(len(message["token_ids"]) for message in messages) == 16
    assert all(isinstance(token, int) for message in messages for token in message["token_ids"])
    assert "".join(message.get("text", "") for message in messages).strip()
    assert [message.get("finish_reason") for message in messages].count("FINISH_REASON_LENGTH") == 1
    assert last["finish_reason"] == "FINISH_REASON_LENGTH"
    assert (last["usage"]["prompt_tokens"], last["usage"]["output_tokens"]) == (5, 16), last
