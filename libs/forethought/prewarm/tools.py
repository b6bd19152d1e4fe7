"""Non-LLM tool backends that can be prewarmed (Hermes section 3.4: Docker and DNN backends).

A ``ToolLauncher`` reports whether it can run here, warms its backend (returns once it serves), and
releases it. Built in: a Python sandbox on a spawn-context process pool (warm once a trivial task ran
in every worker) and containers through the Docker CLI where ``docker info`` succeeds.
"""

from __future__ import annotations

import asyncio
import ctypes
import multiprocessing
import shutil
import signal
import subprocess
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str = ""


@runtime_checkable
class ToolLauncher(Protocol):
    """One kind of tool backend the prewarm agent can start ahead of use."""

    kind: str

    def availability(self) -> Availability:
        """Whether this kind can run on this machine, and why not."""

    async def warm(self) -> None:
        """Starts the backend; returns once it serves requests."""

    async def release(self) -> None:
        """Stops the backend and frees what it holds."""


_PR_SET_PDEATHSIG = 1


def _execute_snippet(source: str) -> Any:
    # Runs in a pool worker: a fresh namespace per snippet; the snippet leaves its answer in `result`.
    namespace: dict[str, Any] = {}
    exec(compile(source, "<sandbox>", "exec"), namespace)
    return namespace.get("result")


def _ready() -> int:
    return 1


def _die_with_parent() -> None:
    # Pool processes must not outlive a worker that was killed (SIGKILL skips the pool's own shutdown).
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ProcessPoolSandbox:
    """A Python code sandbox on a pool of spawned processes (isolated from the worker's memory)."""

    kind = "python-sandbox"

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def availability(self) -> Availability:
        return Availability(True)

    @property
    def is_warm(self) -> bool:
        return self._pool is not None

    async def warm(self) -> None:
        await self._warm_pool()

    async def _warm_pool(self) -> ProcessPoolExecutor:
        if self._pool is not None:
            return self._pool
        pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_die_with_parent)
        loop = asyncio.get_running_loop()
        # Processes spawn lazily: one trivial task per worker pays the interpreter start now.
        await asyncio.gather(*(loop.run_in_executor(pool, _ready) for _ in range(self.workers)))
        self._pool = pool
        return pool

    async def run_code(self, source: str, timeout_s: float = 30.0) -> Any:
        """Executes ``source`` in a pool process (warming it if cold); returns its ``result``."""
        pool = await self._warm_pool()
        future = asyncio.get_running_loop().run_in_executor(pool, _execute_snippet, source)
        return await asyncio.wait_for(future, timeout_s)

    async def release(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, True, cancel_futures=True)


class DockerContainerLauncher:
    """A long-lived container from ``image``, started with the Docker CLI."""

    kind = "container"

    def __init__(
        self, image: str = "python:3.11-slim", command: tuple[str, ...] = ("sleep", "infinity")
    ) -> None:
        self.image = image
        self.command = command
        self.container_id = ""

    def availability(self) -> Availability:
        if shutil.which("docker") is None:
            return Availability(False, "the docker CLI is not installed")
        probe = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=10, check=False)
        if probe.returncode != 0:
            return Availability(False, f"docker info failed: {probe.stderr.strip()[:200]}")
        return Availability(True)

    async def warm(self) -> None:
        if self.container_id:
            return
        process = await asyncio.create_subprocess_exec(
            "docker", "run", "-d", "--rm", self.image, *self.command,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"docker run {self.image} failed: {err.decode().strip()[:200]}")
        self.container_id = out.decode().strip()

    async def release(self) -> None:
        container, self.container_id = self.container_id, ""
        if container:
            process = await asyncio.create_subprocess_exec(
                "docker", "rm", "-f", container,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )
            await process.wait()
