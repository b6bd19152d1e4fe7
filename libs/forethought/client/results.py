"""What the client hands back: streamed chunks, a whole completion, workers, and errors, as typed values
instead of protobuf messages."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import grpc

from forethought.domain import EngineStats, FinishReason, PositionLogprobs, Usage
from forethought.rpc import convert
from forethought.rpc.errors import invalid_argument_of, retry_delay_of
from forethought.v1 import scheduler_pb2


@dataclass(frozen=True)
class Chunk:
    """One message of a ``Generate`` stream: the tokens since the previous one and their text; the first
    names the worker and the forecast, the last the finish reason and usage. ``logprobs``: one entry per
    token when the request asked for them (``SamplingParams.logprobs``); ``prompt_logprobs``: one per prompt
    token, on the first chunk (``SamplingParams.prompt_logprobs``)."""

    request_id: str
    token_ids: tuple[int, ...]
    text: str
    worker_id: str = ""
    predicted_output_tokens: float = 0.0  # the predictor's forecast of the output length; 0: none
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    queue_s: float = 0.0  # time the request waited before running (last chunk)
    logprobs: tuple[PositionLogprobs, ...] = ()
    prompt_logprobs: tuple[PositionLogprobs, ...] = ()

    @classmethod
    def of(cls, reply: scheduler_pb2.GenerateResponse) -> Chunk:
        usage = convert.usage_from_proto(reply.usage) if reply.HasField("usage") else None
        return cls(reply.request_id, tuple(reply.token_ids), reply.text, reply.worker_id, reply.predicted_output_tokens,
                   convert.finish_from_proto(reply.finish_reason), usage, reply.usage.queue_s,
                   convert.logprobs_from_proto(reply.logprobs), convert.logprobs_from_proto(reply.prompt_logprobs))


@dataclass(frozen=True)
class Completion:
    """A whole answer."""

    request_id: str
    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason | None
    usage: Usage | None
    worker_id: str
    forecast: float  # the predictor's forecast of the output length; 0: none
    queue_s: float
    logprobs: tuple[PositionLogprobs, ...] = ()  # one per token, when asked for
    prompt_logprobs: tuple[PositionLogprobs, ...] = ()  # one per prompt token, when asked for

    @classmethod
    def of(cls, chunks: Iterable[Chunk]) -> Completion:
        chunks = list(chunks)
        last = chunks[-1] if chunks else Chunk("", (), "")
        return cls(
            request_id=last.request_id, text="".join(chunk.text for chunk in chunks),
            token_ids=tuple(token for chunk in chunks for token in chunk.token_ids), finish_reason=last.finish_reason,
            usage=last.usage, worker_id=next((chunk.worker_id for chunk in reversed(chunks) if chunk.worker_id), ""),
            forecast=next((chunk.predicted_output_tokens for chunk in chunks if chunk.predicted_output_tokens), 0.0),
            queue_s=last.queue_s, logprobs=tuple(position for chunk in chunks for position in chunk.logprobs),
            prompt_logprobs=tuple(position for chunk in chunks for position in chunk.prompt_logprobs),
        )


@dataclass(frozen=True)
class Worker:
    """A worker as the scheduler lists it."""

    worker_id: str
    address: str
    model: str
    engine: str
    capacity: int
    health: str  # SERVING, DRAINING or UNHEALTHY
    load: EngineStats
    heartbeat_age_s: float

    @classmethod
    def of(cls, info: scheduler_pb2.WorkerInfo) -> Worker:
        return cls(info.worker_id, info.address, info.model, info.engine, info.capacity,
                   scheduler_pb2.WorkerHealth.Name(info.health).removeprefix("WORKER_HEALTH_"),
                   convert.load_from_proto(info.load), info.heartbeat_age_s)


class ClientError(Exception):
    """A call failed: its gRPC status ``code`` and ``message``; ``field`` names the refused field of an
    INVALID_ARGUMENT, ``retry_after_s`` is the server's hint of a RESOURCE_EXHAUSTED; ``attempts`` made;
    ``tokens_delivered``: output tokens of a stream that reached the caller before it broke (0 otherwise)."""

    def __init__(self, code: grpc.StatusCode, message: str, field: str = "", retry_after_s: float | None = None,
                 attempts: int = 1, tokens_delivered: int = 0) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s
        self.attempts = attempts
        self.tokens_delivered = tokens_delivered

    @classmethod
    def of(cls, error: grpc.aio.AioRpcError, attempts: int = 1, tokens_delivered: int = 0) -> ClientError:
        code = error.code()
        field = invalid_argument_of(error).field if code == grpc.StatusCode.INVALID_ARGUMENT else ""
        message = error.details() or code.name
        if tokens_delivered:
            message += f" (the stream broke after {tokens_delivered} tokens were delivered; not retried)"
        return cls(code, message, field, retry_delay_of(error), attempts, tokens_delivered)


@dataclass(frozen=True)
class ApplicationRun:
    """A submitted application run: its id, and the demand service's first estimate and Gittins rank."""

    run_id: str
    estimated_completion_s: float
    gittins_rank: float


@dataclass(frozen=True)
class RunProgress:
    """One message of a run's watch stream: a step's state with the run's estimate, or the run's end."""

    run_id: str
    step: str  # empty on the run's last message
    execution: int  # the step execution's position in the run, from 0
    state: str  # QUEUED, RUNNING, DONE or FAILED
    remaining_s: float
    gittins_rank: float
    at_s: float  # seconds since the run was submitted
    finished: bool
    act_s: float  # the run's completion time, on its last message

    @classmethod
    def of(cls, reply: scheduler_pb2.WatchApplicationResponse) -> RunProgress:
        return cls(reply.run_id, reply.step, reply.execution, scheduler_pb2.StepState.Name(reply.state).removeprefix("STEP_STATE_"),
                   reply.remaining_s, reply.gittins_rank, reply.at_s, reply.finished, reply.act_s)


@dataclass(frozen=True)
class FinishedRun:
    """A finished run: its application completion time, its step executions, whether the graph learnt it."""

    act_s: float
    steps: int
    learnt: bool
