"""The OpenAI-compatible routes over the scheduler's gRPC ``SchedulerService``.

Each generating call opens one ``Generate`` stream per choice (``n``) and waits for their first messages before
answering, so a refusal (a bad field, an unknown model, a full queue) is an HTTP error status, not a broken
stream. Until
the answer is complete the response also watches the connection: a client that leaves cancels the gRPC
call, and the scheduler aborts the request on its worker. The caller's ``Authorization: Bearer`` header goes
to the scheduler as its ``authorization`` metadata, so the scheduler's tenants decide (401 when it refuses).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import grpc
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from opentelemetry import propagate, trace
from starlette.exceptions import HTTPException
from starlette.types import Receive, Scope, Send

from forethought.domain import InvalidField
from forethought.rpc.access import AUTHORIZATION_KEY
from forethought.rpc.channels import ChannelTls, check_health, open_channel
from forethought.services.http.openai_errors import HttpError, error_json, http_error, http_error_of
from forethought.services.http.openai_requests import (
    GatewayRequest,
    chat_request,
    completion_request,
    require_unicode_text,
)
from forethought.services.http.openai_responses import (
    DONE,
    Answer,
    Route,
    answer_json,
    chunk_json,
    sse,
    usage_chunk_json,
)
from forethought.telemetry.tracing import trace_metadata
from forethought.v1 import scheduler_pb2, scheduler_pb2_grpc

log = logging.getLogger(__name__)
tracer = trace.get_tracer("forethought.http")

Parse = Callable[[Mapping[str, Any], Mapping[str, str], str, int], GatewayRequest]
REQUEST_ID_HEADER = "x-forethought-request-id"


def error_response(error: HttpError) -> JSONResponse:
    return JSONResponse(error.body, status_code=error.status, headers=error.headers)


def call_metadata(request: Request) -> tuple[tuple[str, str], ...]:
    """A scheduler call's metadata: the trace context and the caller's ``Authorization`` header, if any."""
    authorization = request.headers.get(AUTHORIZATION_KEY)
    return (*trace_metadata(), *(((AUTHORIZATION_KEY, authorization),) if authorization else ()))


def build_app(scheduler_address: str, request_timeout_s: float, default_max_tokens: int,
              tls: ChannelTls | None = None) -> FastAPI:
    """The FastAPI application; its lifespan opens the channel to the scheduler (TLS when ``tls`` is given)
    and closes it."""
    channel: grpc.aio.Channel | None = None
    stub: scheduler_pb2_grpc.SchedulerServiceStub | None = None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        nonlocal channel, stub
        # Untraced: a client interceptor costs a task per streamed call; the context goes as metadata.
        channel = open_channel(scheduler_address, traced=False, tls=tls)
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        try:
            yield
        finally:
            await channel.close()

    app = FastAPI(title="Forethought", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    async def generate(request: Request, route: Route, parse: Parse) -> Response:
        assert stub is not None  # NOTE: the lifespan opened it before the first request
        try:
            body = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            return error_response(HttpError(400, error_json(f"the body is not JSON: {error}", "invalid_request_error",
                                                            None, "invalid_argument")))
        if not isinstance(body, dict):
            return error_response(http_error(grpc.StatusCode.INVALID_ARGUMENT, "body: must be a JSON object", "body"))
        request_id = ("chatcmpl-" if route is Route.CHAT else "cmpl-") + uuid.uuid4().hex
        try:
            require_unicode_text(body)
            gateway_request = parse(body, request.headers, request_id, default_max_tokens)
        except InvalidField as error:
            return error_response(http_error(grpc.StatusCode.INVALID_ARGUMENT, str(error), error.field))
        return GenerationResponse(stub, route, gateway_request, request_timeout_s, propagate.extract(request.headers),
                                  request.headers.get(AUTHORIZATION_KEY))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await generate(request, Route.COMPLETION, completion_request)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await generate(request, Route.CHAT, chat_request)

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        assert stub is not None
        try:
            reply = await stub.ListWorkers(scheduler_pb2.ListWorkersRequest(), timeout=10, metadata=call_metadata(request))
        except grpc.aio.AioRpcError as error:
            return error_response(http_error_of(error))
        names = sorted({worker.model for worker in reply.workers})
        return JSONResponse({"object": "list", "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "forethought"} for name in names]})

    @app.get("/health")
    async def health() -> Response:
        return JSONResponse({"status": "ok"})

    @app.get("/ready")
    async def ready() -> Response:
        assert channel is not None
        state = await check_health(channel)
        if state != "SERVING":
            return error_response(http_error(grpc.StatusCode.UNAVAILABLE, f"the scheduler at {scheduler_address} is {state}"))
        return JSONResponse({"status": "ready", "scheduler": scheduler_address})

    @app.exception_handler(HTTPException)
    async def http_exception(request: Request, error: HTTPException) -> Response:
        kind = "not_found_error" if error.status_code == 404 else "invalid_request_error"
        return JSONResponse(error_json(f"{request.method} {request.url.path}: {error.detail}", kind, None, None),
                            status_code=error.status_code, headers=error.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> Response:
        error_id = uuid.uuid4().hex[:12]
        log.error("error %s in %s %s", error_id, request.method, request.url.path, exc_info=error)
        return JSONResponse(error_json(f"internal error {error_id}", "server_error", None, "internal"), status_code=500)

    return app


class GenerationResponse(Response):
    """Streams (or collects) one ``Generate`` call, cancelling it when the client disconnects first."""

    def __init__(self, stub: scheduler_pb2_grpc.SchedulerServiceStub, route: Route, request: GatewayRequest,
                 timeout_s: float, trace_context: Any, authorization: str | None) -> None:
        super().__init__()
        self._stub = stub
        self._route = route
        self._request = request
        self._logprobs = request.generate.sampling.HasField("logprobs")  # the caller asked for them
        self._timeout_s = timeout_s
        self._trace_context = trace_context
        self._authorization = ((AUTHORIZATION_KEY, authorization),) if authorization else ()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = f"POST {scope['path']}"
        with tracer.start_as_current_span(name, context=self._trace_context, kind=trace.SpanKind.SERVER):
            choices = self._request.choice_requests()
            calls = [self._stub.Generate(choice, timeout=self._timeout_s, metadata=(*trace_metadata(), *self._authorization))
                     for choice in choices]
            serving = asyncio.ensure_future(self._serve(choices, calls, send))
            watching = asyncio.ensure_future(_disconnect(receive))
            try:
                await asyncio.wait({serving, watching}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not serving.done():
                    serving.cancel()
                watching.cancel()
                await asyncio.gather(serving, watching, return_exceptions=True)
                for call in calls:
                    call.cancel()  # the client left, the server stops or a choice failed: the scheduler aborts the rest
            if not serving.cancelled() and serving.exception() is not None:
                raise serving.exception()  # type: ignore[misc]

    async def _serve(self, choices: list[scheduler_pb2.GenerateRequest], calls: list[grpc.aio.UnaryStreamCall],
                     send: Send) -> None:
        generate = self._request.generate
        answers = [Answer(generate.request_id, generate.model, int(time.time()), index=index, call_id=choice.request_id,
                          echo=self._request.echo, prompt_text=generate.text) for index, choice in enumerate(choices)]
        # Every choice's first message before answering: a refusal is an HTTP status, not a broken stream.
        firsts = await asyncio.gather(*(call.read() for call in calls), return_exceptions=True)
        if failed := _first_failure(firsts):
            return await _send_json(send, *_error_parts(http_error_of(failed, self._route.prompt_param)))
        if not self._request.stream:
            collected = await asyncio.gather(*(_collect(call, first, answer) for call, first, answer in
                                               zip(calls, firsts, answers, strict=True)), return_exceptions=True)
            if failed := _first_failure(collected):
                return await _send_json(send, *_error_parts(http_error_of(failed, self._route.prompt_param)))
            return await _send_json(send, 200, answer_json(self._route, answers, self._logprobs),
                                    {REQUEST_ID_HEADER: generate.request_id})
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
            (REQUEST_ID_HEADER.encode(), generate.request_id.encode())]})
        await self._stream(calls, firsts, answers, send)

    async def _stream(self, calls: list[grpc.aio.UnaryStreamCall], firsts: list[Any], answers: list[Answer],
                      send: Send) -> None:
        """The choices' messages as events, in the order they come; a failure after tokens went out is the
        stream's last event (OpenAI's clients raise it)."""
        replies: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()
        pumps = [asyncio.ensure_future(_pump(index, call, first, replies))
                 for index, (call, first) in enumerate(zip(calls, firsts, strict=True))]
        started = [False] * len(calls)
        running, failed = len(calls), False
        try:
            while running:
                index, reply = await replies.get()
                if reply is grpc.aio.EOF:
                    running -= 1
                    continue
                if isinstance(reply, grpc.aio.AioRpcError):
                    refusal = http_error_of(reply, self._route.prompt_param)
                    await send({"type": "http.response.body", "body": sse(refusal.body), "more_body": True})
                    failed = True
                    break
                said = answers[index].add(reply)
                if not started[index] or said.text or reply.finish_reason or said.logprobs:
                    event = chunk_json(self._route, answers[index], reply, said, not started[index],
                                       self._request.include_usage, self._logprobs)
                    await send({"type": "http.response.body", "body": sse(event), "more_body": True})
                    started[index] = True
        finally:
            for pump in pumps:
                pump.cancel()
        if self._request.include_usage and not failed:
            await send({"type": "http.response.body", "body": sse(usage_chunk_json(self._route, answers)), "more_body": True})
        await send({"type": "http.response.body", "body": DONE, "more_body": False})


def _first_failure(results: list[Any]) -> grpc.aio.AioRpcError | None:
    """The first failed call among gathered results; anything else that was raised is raised again."""
    for result in results:
        if isinstance(result, grpc.aio.AioRpcError):
            return result
        if isinstance(result, BaseException):
            raise result
    return None


async def _collect(call: grpc.aio.UnaryStreamCall, reply: Any, answer: Answer) -> None:
    while reply is not grpc.aio.EOF:
        answer.add(reply)
        reply = await call.read()


async def _pump(index: int, call: grpc.aio.UnaryStreamCall, reply: Any, replies: asyncio.Queue[tuple[int, Any]]) -> None:
    """Puts a choice's messages on ``replies``, then EOF, or the failure that ended it."""
    try:
        while reply is not grpc.aio.EOF:
            await replies.put((index, reply))
            reply = await call.read()
    except grpc.aio.AioRpcError as error:
        reply = error
    await replies.put((index, reply))


def _error_parts(error: HttpError) -> tuple[int, dict[str, Any], dict[str, str]]:
    return error.status, error.body, error.headers


async def _send_json(send: Send, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()  # as JSONResponse writes it
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        *((name.lower().encode(), value.encode()) for name, value in headers.items())]})
    await send({"type": "http.response.body", "body": body})


async def _disconnect(receive: Receive) -> None:
    """Returns when the client closes the connection (the request body was read before)."""
    while (await receive())["type"] != "http.disconnect":
        pass
