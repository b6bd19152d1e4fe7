"""Domain errors that services raise and the status codes they become.

Shells raise these, and a broken request rule anywhere is ``forethought.domain.InvalidField``; one
interceptor turns both into gRPC statuses, so servicers never build statuses by hand and a message always
names the field and the rule it broke.

Errors with something a program should act on also carry it as a standard ``google.rpc`` detail in the
status (``grpc-status-details-bin``), which gRPC clients of every language decode: ``BadRequest`` with
the field and its rule, ``RetryInfo`` with the delay before a retry.
"""

from __future__ import annotations

import grpc
from google.protobuf import duration_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from forethought.cluster.redis_client import REDIS_UNREACHABLE
from forethought.domain import InvalidField

STORE_RETRY_AFTER_S = 1.0
"""The wait a caller is asked for when Redis, the shared state, cannot be reached."""

STATUS_DETAILS_KEY = "grpc-status-details-bin"
"""The trailing metadata that carries the serialized ``google.rpc.Status`` (a convention of every gRPC language)."""


class ServiceError(Exception):
    """An error with a gRPC status code and a message for the caller."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def detail(self) -> Message | None:
        """The ``google.rpc`` error detail a client program reads, if the error has one."""
        return None

    def rich_status(self) -> status_pb2.Status:
        """The ``google.rpc.Status`` of this error: its code, message and detail."""
        status = status_pb2.Status(code=self.code.value[0], message=self.message)
        detail = self.detail()
        if detail is not None:
            status.details.add().Pack(detail)
        return status


class InvalidArgument(ServiceError):
    """A request field breaks a rule (``forethought.domain.InvalidField`` on the wire): ``<field>: <rule>``."""

    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule

    def detail(self) -> error_details_pb2.BadRequest:
        return error_details_pb2.BadRequest(
            field_violations=[error_details_pb2.BadRequest.FieldViolation(field=self.field, description=self.rule)])


class Unauthenticated(ServiceError):
    """The call carries no valid credential (``authorization: Bearer <token>``)."""

    code = grpc.StatusCode.UNAUTHENTICATED


class NotFound(ServiceError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(ServiceError):
    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(ServiceError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Unimplemented(ServiceError):
    code = grpc.StatusCode.UNIMPLEMENTED


class ResourceExhausted(ServiceError):
    """The service is full; ``retry_after_s`` tells the caller when to try again."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(f"{message}; retry after {retry_after_s:.2f} s")
        self.retry_after_s = retry_after_s

    def detail(self) -> error_details_pb2.RetryInfo:
        return retry_info(self.retry_after_s)


class Unavailable(ServiceError):
    """A dependency is down or the work was lost mid-way; the message says whether to retry, and
    ``retry_after_s``, when given, when (sent as ``RetryInfo``)."""

    code = grpc.StatusCode.UNAVAILABLE

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s

    def detail(self) -> error_details_pb2.RetryInfo | None:
        return None if self.retry_after_s is None else retry_info(self.retry_after_s)


def retry_info(seconds: float) -> error_details_pb2.RetryInfo:
    """The ``RetryInfo`` detail asking a caller to wait ``seconds`` before retrying."""
    delay = duration_pb2.Duration()
    delay.FromNanoseconds(round(seconds * 1e9))
    return error_details_pb2.RetryInfo(retry_delay=delay)


def service_error_of(error: Exception) -> Exception:
    """The status a handler's exception maps to: a broken request rule (``InvalidField``) is INVALID_ARGUMENT,
    and Redis down, not answering or still loading its data is UNAVAILABLE, which callers retry."""
    if isinstance(error, InvalidField):
        return InvalidArgument(error.field, error.rule)
    if isinstance(error, REDIS_UNREACHABLE):
        return Unavailable(f"the shared state (Redis) cannot be reached: {error}; retry", STORE_RETRY_AFTER_S)
    return error


def rich_status_of(error: grpc.aio.AioRpcError | grpc.Call) -> status_pb2.Status | None:
    """The ``google.rpc.Status`` a failed call carries (None when it has no details): the client side."""
    for key, value in error.trailing_metadata() or ():
        if key == STATUS_DETAILS_KEY:
            return status_pb2.Status.FromString(value)
    return None


def retry_delay_of(error: grpc.aio.AioRpcError | grpc.Call) -> float | None:
    """Seconds the server asks a caller to wait before retrying (its ``RetryInfo`` detail); None when it gave none."""
    status = rich_status_of(error)
    retry_info = error_details_pb2.RetryInfo()
    if status is not None and any(detail.Unpack(retry_info) for detail in status.details):
        return float(retry_info.retry_delay.ToNanoseconds()) / 1e9
    return None


def invalid_argument_of(error: grpc.aio.AioRpcError | grpc.Call) -> InvalidArgument:
    """An INVALID_ARGUMENT a downstream call answered, rebuilt to pass on: the field and rule of its
    ``BadRequest`` detail (every service here sends one), else the whole request and its message."""
    status = rich_status_of(error)
    bad_request = error_details_pb2.BadRequest()
    if status is not None and any(detail.Unpack(bad_request) for detail in status.details):
        violation = bad_request.field_violations[0]
        return InvalidArgument(violation.field, violation.description)
    return InvalidArgument("request", error.details() or "refused downstream")
