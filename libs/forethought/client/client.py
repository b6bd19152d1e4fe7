"""``AsyncForethoughtClient`` and ``ForethoughtClient``: the scheduler's gRPC API as typed Python calls.

Every call has a deadline (``timeout_s``, per call or the client's default), carries the active trace
context, and is retried by ``forethought.client.retry``'s rules: only before the first chunk reached the
caller, only for UNAVAILABLE and RESOURCE_EXHAUSTED, waiting the server's hint when it sent one. Given
several scheduler replicas (they share Redis, so any of them serves any request), calls take turns over
them and a retry goes to the next one, so a replica that died costs a retry, not the call. A stream cut
after tokens reached the caller is not re-issued (the caller has shown them); its ``ClientError`` says
how many arrived (docs/reliability.md). The blocking client runs the async one on an event loop of its
own, in a background thread, so both behave the same.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

import grpc

from forethought.client.blocking import BlockingClient, blocking, blocking_stream
from forethought.client.connection import ChannelClient, client_channel
from forethought.client.requests import Chat, ServiceLevelObjective, deadline_timestamp, generate_request
from forethought.client.results import ApplicationRun, Chunk, ClientError, Completion, FinishedRun, RunProgress, Worker
from forethought.client.retry import RetryPolicy, retry_delay
from forethought.domain import SamplingParams, ServiceClass
from forethought.rpc.access import bearer_metadata
from forethought.rpc.errors import retry_delay_of
from forethought.telemetry.tracing import trace_metadata
from forethought.v1 import scheduler_pb2, scheduler_pb2_grpc

T = TypeVar("T")
P = ParamSpec("P")
DEFAULT_RETRY = RetryPolicy()


class AsyncForethoughtClient(ChannelClient):
    """The scheduler's API for asyncio code; use it as ``async with AsyncForethoughtClient(address) as client``.

    Args:
        address: the scheduler's host:port, or the host:ports of several replicas sharing one Redis.
        timeout_s: the default deadline of each call, in seconds (a call's own ``timeout_s`` wins); None: none.
        retry: how failed calls are retried.
        token: the tenant's bearer token, sent as ``authorization: Bearer <token>`` on every call
            (a scheduler with a tenants file refuses calls without one: docs/access.md).
        root_certs: PEM root certificates to trust: the channel uses TLS when given, plaintext otherwise.
        client_cert: (PEM private key, PEM certificate chain) to show a scheduler that requires one (mutual TLS).
    """

    def __init__(self, address: str | Sequence[str], *, timeout_s: float | None = 120.0, retry: RetryPolicy = DEFAULT_RETRY,
                 token: str | None = None, root_certs: bytes | None = None,
                 client_cert: tuple[bytes, bytes] | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        addresses = [address] if isinstance(address, str) else list(address)
        if not addresses:
            raise ValueError("address: at least one scheduler address is required")
        super().__init__(*(client_channel(each, root_certs, client_cert) for each in addresses))
        self._credential = bearer_metadata(token)
        self._stubs = [scheduler_pb2_grpc.SchedulerServiceStub(channel) for channel in self._channels]
        self._turn = 0  # the replica the next call starts on
        self._timeout_s = timeout_s
        self._retry = retry
        self._clock = clock
        self._sleep = sleep

    async def generate(self, *, model: str, max_tokens: int, prompt: str | None = None,
                       token_ids: Sequence[int] | None = None, chat: Chat | None = None,
                       sampling: SamplingParams | None = None, service_class: ServiceClass | None = None,
                       slo: ServiceLevelObjective | None = None, deadline: datetime | float | None = None,
                       application_id: str = "", step: str = "", execution: int | None = None, request_id: str = "",
                       return_text: bool = True, fit_max_tokens: bool = False,
                       timeout_s: float | None = None) -> AsyncIterator[Chunk]:
        """Streams the answer chunk by chunk; exactly one of ``prompt``, ``token_ids`` and ``chat``.

        ``deadline`` is the scheduler's finish-by time (it orders by least slack); ``timeout_s`` is when this
        call gives up; ``fit_max_tokens`` lets the worker lower ``max_tokens`` to the context the prompt leaves.
        Leaving the loop early cancels the request on its worker. ``execution`` numbers the step execution of an
        application run the request belongs to (docs/applications.md).

        Raises:
            ClientError: the call failed (after the retries its status allows).
            forethought.domain.InvalidField: the arguments break a rule checked before sending.
        """
        request = generate_request(
            model=model, max_tokens=max_tokens, prompt=prompt, token_ids=token_ids, chat=chat, sampling=sampling,
            service_class=service_class, slo=slo, deadline=deadline, application_id=application_id, step=step,
            execution=execution, request_id=request_id or uuid.uuid4().hex, return_text=return_text,
            fit_max_tokens=fit_max_tokens)
        ends = self._ends(timeout_s)
        stubs = self._stub_turns()
        attempt = 1
        while True:
            streamed = False
            delivered = 0
            call = next(stubs).Generate(request, timeout=self._remaining(ends), metadata=self._metadata())
            try:
                async for reply in call:
                    streamed = True
                    delivered += len(reply.token_ids)
                    yield Chunk.of(reply)
                return
            except grpc.aio.AioRpcError as error:
                delay = retry_delay(self._retry, attempt, error.code().name, retry_delay_of(error), streamed, self._remaining(ends))
                if delay is None:
                    raise ClientError.of(error, attempt, delivered) from error
            finally:
                call.cancel()  # the caller left the loop early (or the stream ended): the worker lets go
            await self._sleep(delay)
            attempt += 1

    async def complete(self, *, model: str, max_tokens: int, prompt: str | None = None,
                       token_ids: Sequence[int] | None = None, chat: Chat | None = None,
                       sampling: SamplingParams | None = None, service_class: ServiceClass | None = None,
                       slo: ServiceLevelObjective | None = None, deadline: datetime | float | None = None,
                       application_id: str = "", step: str = "", execution: int | None = None, request_id: str = "",
                       return_text: bool = True, fit_max_tokens: bool = False, timeout_s: float | None = None) -> Completion:
        """The whole answer of ``generate`` (same arguments): text, token ids, usage, finish reason, worker, forecast."""
        return Completion.of([chunk async for chunk in self.generate(
            model=model, max_tokens=max_tokens, prompt=prompt, token_ids=token_ids, chat=chat, sampling=sampling,
            service_class=service_class, slo=slo, deadline=deadline, application_id=application_id, step=step,
            execution=execution, request_id=request_id, return_text=return_text, fit_max_tokens=fit_max_tokens,
            timeout_s=timeout_s)])

    async def cancel(self, request_id: str, *, timeout_s: float | None = None) -> bool:
        """Cancels a request another connection streams (on any replica); False when it was unknown or already finished."""
        reply = await self._unary("Cancel", scheduler_pb2.CancelRequest(request_id=request_id), timeout_s)
        return bool(reply.cancelled)

    async def list_workers(self, model: str = "", *, timeout_s: float | None = None) -> list[Worker]:
        """Every worker the scheduler knows (those serving ``model`` when given), with health and load."""
        reply = await self._unary("ListWorkers", scheduler_pb2.ListWorkersRequest(model=model), timeout_s)
        return [Worker.of(info) for info in reply.workers]

    async def submit_application(self, application: str, *, run_id: str = "", deadline: datetime | float | None = None,
                                 timeout_s: float | None = None) -> ApplicationRun:
        """Starts a run of a registered application (docs/applications.md); its LLM steps are then
        ``generate`` calls with ``application_id=run.run_id`` and ``step``, its tool steps ``report_step``."""
        request = scheduler_pb2.SubmitApplicationRequest(application=application, run_id=run_id)
        if deadline is not None:
            request.deadline.CopyFrom(deadline_timestamp(deadline))
        reply = await self._unary("SubmitApplication", request, timeout_s)
        return ApplicationRun(reply.run_id, reply.estimated_completion_s, reply.gittins_rank)

    async def report_step(self, run_id: str, step: str, duration_s: float, *, timeout_s: float | None = None) -> float:
        """A tool step of the run just ended after ``duration_s``; returns the run's remaining demand estimate."""
        reply = await self._unary("ReportStep", scheduler_pb2.ReportStepRequest(
            run_id=run_id, step=step, duration_s=duration_s), timeout_s)
        return float(reply.remaining_s)

    async def finish_application(self, run_id: str, *, failed: bool = False, timeout_s: float | None = None) -> FinishedRun:
        """Ends the run; ``failed`` abandons it (its steps are not learnt)."""
        reply = await self._unary("FinishApplication", scheduler_pb2.FinishApplicationRequest(
            run_id=run_id, failed=failed), timeout_s)
        return FinishedRun(reply.act_s, reply.steps, reply.learnt)

    async def watch_application(self, run_id: str, *, timeout_s: float | None = None) -> AsyncIterator[RunProgress]:
        """Streams the run's progress until it finishes (the last item has ``finished`` and the ACT)."""
        call = next(self._stub_turns()).WatchApplication(scheduler_pb2.WatchApplicationRequest(run_id=run_id),
                                           timeout=self._remaining(self._ends(timeout_s)), metadata=self._metadata())
        try:
            async for reply in call:
                yield RunProgress.of(reply)
        except grpc.aio.AioRpcError as error:
            raise ClientError.of(error) from error
        finally:
            call.cancel()

    async def _unary(self, method: str, request: Any, timeout_s: float | None) -> Any:
        ends = self._ends(timeout_s)
        stubs = self._stub_turns()
        attempt = 1
        while True:
            try:
                return await getattr(next(stubs), method)(request, timeout=self._remaining(ends), metadata=self._metadata())
            except grpc.aio.AioRpcError as error:
                delay = retry_delay(self._retry, attempt, error.code().name, retry_delay_of(error), False, self._remaining(ends))
                if delay is None:
                    raise ClientError.of(error, attempt) from error
            await self._sleep(delay)
            attempt += 1

    def _stub_turns(self) -> Iterator[scheduler_pb2_grpc.SchedulerServiceStub]:
        """The replicas one call tries in turn: it starts where the previous call did not, and each retry
        moves on to the next replica."""
        first = self._turn
        self._turn = (first + 1) % len(self._stubs)
        return (self._stubs[(first + attempt) % len(self._stubs)] for attempt in itertools.count())

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        return (*trace_metadata(), *self._credential)

    def _ends(self, timeout_s: float | None) -> float | None:
        timeout_s = timeout_s if timeout_s is not None else self._timeout_s
        return None if timeout_s is None else self._clock() + timeout_s

    def _remaining(self, ends: float | None) -> float | None:
        return None if ends is None else max(0.0, ends - self._clock())


class ForethoughtClient(BlockingClient):
    """The scheduler's API for blocking code, with the async client's methods and rules; use it as
    ``with ForethoughtClient(address) as client`` (arguments as ``AsyncForethoughtClient``)."""

    def __init__(self, address: str | Sequence[str], *, timeout_s: float | None = 120.0, retry: RetryPolicy = DEFAULT_RETRY,
                 token: str | None = None, root_certs: bytes | None = None,
                 client_cert: tuple[bytes, bytes] | None = None) -> None:
        super().__init__(lambda: AsyncForethoughtClient(address, timeout_s=timeout_s, retry=retry, token=token,
                                                        root_certs=root_certs, client_cert=client_cert))

    generate = blocking_stream(AsyncForethoughtClient.generate)
    complete = blocking(AsyncForethoughtClient.complete)
    cancel = blocking(AsyncForethoughtClient.cancel)
    list_workers = blocking(AsyncForethoughtClient.list_workers)
    submit_application = blocking(AsyncForethoughtClient.submit_application)
    report_step = blocking(AsyncForethoughtClient.report_step)
    finish_application = blocking(AsyncForethoughtClient.finish_application)
    watch_application = blocking_stream(AsyncForethoughtClient.watch_application)
