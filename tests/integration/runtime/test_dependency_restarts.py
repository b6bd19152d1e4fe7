"""The predictor and the tokenizer SIGKILLed and restarted under load, each a real process.

Predictor down: requests go on without forecasts (FCFS order, the degraded gauge at 1, one log line) and
carry forecasts again soon after it returns. Tokenizer down: text prompts are refused before they are
accepted (UNAVAILABLE with RetryInfo), the client waits and retries, and they are served once it returns.
Nothing sent is lost; each test prints its counts and the time to recover after the restart.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from forethought.client import ClientError, ForethoughtClient, RetryPolicy
from forethought.cluster.ports import free_port
from forethought.cluster.redis_server import RedisProcess
from forethought.domain import SamplingParams

from tests.conftest import ServiceProcess, wait_serving
from tests.integration.live_mesh import wait_until
from tests.integration.scheduler.test_scheduler import MODEL, metric, scheduler, worker

# Patient enough to outlast a restart on a loaded machine (the tokenizer's start took up to a minute there).
RETRY = RetryPolicy(max_attempts=400, initial_backoff_s=0.2, max_backoff_s=1.0)
CALL_TIMEOUT_S = 300.0


class Restartable:
    """A service on a fixed port that the test kills and starts again at the same address."""

    def __init__(self, name: str, args: tuple[str, ...], redis: RedisProcess, namespace: str, logs: Path,
                 env: dict[str, str] | None = None) -> None:
        self.name = name
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._argv = [sys.executable, "-m", "forethought.cli", "serve", name, "--port", str(self.port),
                      "--redis-url", redis.url, "--namespace", namespace, *args]
        self._logs = logs
        self._env = {**os.environ, **(env or {})}
        self._starts = 0
        self.service: ServiceProcess | None = None

    def start(self) -> float:
        """Starts it; returns the monotonic time it reported SERVING."""
        self._starts += 1
        log_path = self._logs / f"{self.name}-{self._starts}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(self._argv, stdout=log, stderr=subprocess.STDOUT, env=self._env)
        self.service = ServiceProcess(self.name, self.address, process, log_path)
        if not wait_serving(self.address, 120, process):
            raise AssertionError(f"{self.name} never reported SERVING; its log:\n{self.service.log()}")
        return time.monotonic()

    def kill(self) -> None:
        assert self.service is not None
        self.service.process.send_signal(signal.SIGKILL)
        self.service.process.wait()

    def stop(self) -> None:
        if self.service is not None and self.service.process.poll() is None:
            self.service.process.kill()
            self.service.process.wait()


class TextLoad:
    """Threads sending short text prompts through the client until stopped, counting every outcome."""

    def __init__(self, client: ForethoughtClient, threads: int = 3) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.served: list[tuple[float, float, float]] = []  # (monotonic time it was sent, completed, its forecast)
        self._client = client
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(number,)) for number in range(threads)]

    def __enter__(self) -> TextLoad:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(CALL_TIMEOUT_S)

    def served_after(self, since: float, condition: Callable[[float], bool] = lambda forecast: True) -> float | None:
        """When the first request completed after ``since`` whose forecast meets ``condition``."""
        with self._lock:
            return next((done for _, done, forecast in self.served if done > since and condition(forecast)), None)

    def forecasts_sent_and_served_within(self, start: float, end: float) -> list[float]:
        """The forecasts of the requests sent after ``start`` and completed before ``end``."""
        with self._lock:
            return [forecast for sent, done, forecast in self.served if sent > start and done < end]

    @property
    def lost(self) -> int:
        failed = sum(count for name, count in self.counts.items() if name.startswith("failed"))
        return self.counts["sent"] - self.counts["completed"] - failed

    def _run(self, number: int) -> None:
        sequence = 0
        while not self._stop.is_set():
            sequence += 1
            sent = time.monotonic()
            with self._lock:
                self.counts["sent"] += 1
            try:
                answer = self._client.complete(model=MODEL, max_tokens=4, prompt=f"Question {number}.{sequence}: why queue?",
                                               sampling=SamplingParams(ignore_eos=True), timeout_s=CALL_TIMEOUT_S)
            except ClientError as error:
                with self._lock:
                    self.counts[f"failed {error.code.name} after {error.tokens_delivered} tokens"] += 1
                continue
            with self._lock:
                self.counts["completed"] += 1
                self.served.append((sent, time.monotonic(), answer.forecast))
            time.sleep(0.05)


def test_the_predictor_killed_and_restarted_degrades_ordering_never_serving(start_service, redis_server, namespace,
                                                                             tmp_path) -> None:
    worker(start_service, "w0", "20")
    tokenizer = start_service("tokenizer")
    predictor = Restartable("predictor", (), redis_server, namespace, tmp_path,
                            env={"FORETHOUGHT_CACHE": str(tmp_path / "empty-cache")})  # the shipped predictor
    metrics_port = free_port()
    try:
        predictor.start()
        front = scheduler(start_service, "--tokenizer-address", tokenizer.address, "--predictor-address", predictor.address,
                          "--predictor-timeout-s", "5", "--metrics-port", str(metrics_port))
        degraded = lambda: metric(metrics_port, "forethought_degraded", dependency="predictor")  # noqa: E731
        with ForethoughtClient(front.address, retry=RETRY) as client, TextLoad(client) as load:
            wait_until(lambda: load.served_after(0.0, lambda forecast: forecast > 0) is not None, "a forecast served", 60)
            predictor.kill()
            killed = time.monotonic()
            wait_until(lambda: degraded() == 1.0, "the degraded gauge")
            wait_until(lambda: load.forecasts_sent_and_served_within(killed, time.monotonic()),
                       "requests served without a forecast")
            # The new process may answer before its health check reports SERVING: the outage ends when it is started.
            outage = load.forecasts_sent_and_served_within(killed, time.monotonic())
            restarted = predictor.start()
            down_s = restarted - killed
            wait_until(lambda: load.served_after(restarted, lambda forecast: forecast > 0) is not None,
                       "forecasts again", 60)
            recovered_s = (load.served_after(restarted, lambda forecast: forecast > 0) or 0.0) - restarted
    finally:
        predictor.stop()
    print(f"predictor: down {down_s:.1f} s; {dict(load.counts)}, lost {load.lost}; {len(outage)} served unforecast while down; "
          f"forecasts again {recovered_s:.2f} s after it reported SERVING")
    assert load.lost == 0 and load.counts["sent"] == load.counts["completed"]
    assert outage and set(outage) == {0.0}  # served all along, FCFS
    assert degraded() == 0.0
    assert "predictor unavailable" in front.log() and "predictor reachable again" in front.log()


def test_the_tokenizer_killed_and_restarted_refuses_text_with_retry_info_and_loses_nothing(
        start_service, redis_server, namespace, tmp_path) -> None:
    worker(start_service, "w0", "20")
    tokenizer = Restartable("tokenizer", (), redis_server, namespace, tmp_path)
    metrics_port = free_port()
    try:
        tokenizer.start()
        front = scheduler(start_service, "--tokenizer-address", tokenizer.address, "--metrics-port", str(metrics_port))
        degraded = lambda: metric(metrics_port, "forethought_degraded", dependency="tokenizer")  # noqa: E731
        with ForethoughtClient(front.address, retry=RETRY) as client, TextLoad(client) as load:
            wait_until(lambda: load.served_after(0.0) is not None, "a text prompt served", 60)
            tokenizer.kill()
            killed = time.monotonic()
            wait_until(lambda: degraded() == 1.0, "the degraded gauge")
            time.sleep(2.0)  # down for a while under load
            restarted = tokenizer.start()
            down_s = restarted - killed
            wait_until(lambda: load.served_after(restarted) is not None, "text prompts served again", 60)
            recovered_s = (load.served_after(restarted) or 0.0) - restarted
    finally:
        tokenizer.stop()
    print(f"tokenizer: down {down_s:.1f} s; {dict(load.counts)}, lost {load.lost}; text served again {recovered_s:.2f} s after it "
          "reported SERVING")
    assert load.lost == 0
    # Refusals were retried by the client; only a stream whose detokenizing was cut mid-way may fail.
    assert all(name in ("sent", "completed") or (name.startswith("failed UNAVAILABLE") and not name.endswith(" 0 tokens"))
               for name in load.counts)
    assert degraded() == 0.0
    assert "tokenizer unavailable" in front.log() and "tokenizer reachable again" in front.log()
