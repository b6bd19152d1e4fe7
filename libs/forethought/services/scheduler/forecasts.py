"""Output-length forecasts from the predictor service (SSJF section 3), optional by design.

A forecast orders the queue (SSJF, Gittins, LSTF) and weighs ``least_load`` placement by tokens (E2
prices decode by the mean of finished requests instead: docs/e2.md). Without one the
request still runs: no address configured, a timeout or an error leaves it without a forecast, the
DEGRADED gauge says so and one log line marks each change of state. A prompt the predictor refuses
(``INVALID_ARGUMENT``) goes without a forecast alone: the predictor answered, so it is not down. While degraded, only one call per
``probe_interval_s`` tries the predictor, so a hung predictor does not add its timeout to every request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from forethought.rpc.channels import ChannelTls, open_channel
from forethought.scheduling import DependencyHealth
from forethought.services.scheduler.dependency_reports import record_outcome
from forethought.telemetry.metrics import DEGRADED
from forethought.v1 import predictor_pb2, predictor_pb2_grpc

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Forecast:
    mean_tokens: float = 0.0
    quantiles: tuple[float, ...] = ()


NO_FORECAST = Forecast()


@dataclass(frozen=True)
class ForecastPrompt:
    """What the predictor reads of a request: its text and the lengths of its conversation's earlier answers."""

    text: str
    earlier_answer_chars: tuple[int, ...] = ()

    def history(self) -> predictor_pb2.ConversationHistory:
        return predictor_pb2.ConversationHistory(earlier_answer_chars=self.earlier_answer_chars)


class ForecastClient:
    """Calls ``PredictorService.Predict`` with a timeout; degrades to no forecast on any failure."""

    def __init__(self, address: str, timeout_s: float, probe_interval_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, tls: ChannelTls | None = None) -> None:
        self._channel = open_channel(address, tls=tls) if address else None
        self._stub = predictor_pb2_grpc.PredictorServiceStub(self._channel) if self._channel else None
        self._timeout_s = timeout_s
        self._probe_interval_s = probe_interval_s
        self._clock = clock
        self._next_probe_s = 0.0
        self._background: set[asyncio.Task[None]] = set()
        self.health = DependencyHealth("predictor", configured=self._stub is not None)
        DEGRADED.labels("scheduler", "predictor").set(1 if self.health.degraded else 0)
        if self._stub is None:
            log.warning("no predictor configured (--predictor-address): degraded, requests are ordered FCFS")

    async def forecast(self, prompt: ForecastPrompt, model: str) -> Forecast:
        """The forecast for ``prompt``; ``NO_FORECAST`` when there is no text or no working predictor."""
        if self._stub is None or not prompt.text:
            return NO_FORECAST
        if self.health.degraded:
            if self._clock() < self._next_probe_s:
                return NO_FORECAST
            self._next_probe_s = self._clock() + self._probe_interval_s
        try:
            reply = await self._stub.Predict(
                predictor_pb2.PredictRequest(prompts=[prompt.text], histories=[prompt.history()], model=model),
                timeout=self._timeout_s)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                # The predictor answered: it refused this request alone, and serves the others.
                self._record(True)
                log.warning("the predictor refused a %s prompt (%s): it goes without a forecast", model, error.details())
                return NO_FORECAST
            self._record(False, f"{error.code().name}: {error.details()}")
            return NO_FORECAST
        self._record(True)
        forecast = reply.forecasts[0]
        return Forecast(forecast.mean, tuple(q.tokens for q in forecast.quantiles))

    def observe(self, prompt: ForecastPrompt, output_tokens: int, model: str) -> None:
        """Reports a finished request's real length on its served model in the background (the predictor
        learns from it and calibrates its forecasts for that model)."""
        if self._stub is None or not prompt.text or self.health.degraded:
            return
        task = asyncio.create_task(self._observe(prompt, output_tokens, model))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _observe(self, prompt: ForecastPrompt, output_tokens: int, model: str) -> None:
        if self._stub is None:
            return
        try:
            await self._stub.Observe(
                predictor_pb2.ObserveRequest(prompt=prompt.text, output_tokens=output_tokens, history=prompt.history(),
                                             model=model),
                timeout=self._timeout_s * 4)
        except grpc.aio.AioRpcError as error:
            log.debug("predictor Observe failed: %s", error.details())

    def _record(self, ok: bool, error: str = "") -> None:
        record_outcome(self.health, ok, error,
                       "predictor unavailable ({error}): degraded, requests without a forecast are ordered FCFS",
                       "predictor reachable again: requests carry forecasts")

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self._channel is not None:
            await self._channel.close()
