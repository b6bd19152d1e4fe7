"""Domain errors that services raise and the status codes they become.

Library code raises these (or ValueError); one interceptor turns them into gRPC statuses, so servicers
never build statuses by hand and a message always names the field and the rule it broke.
"""

from __future__ import annotations

import grpc


class ServiceError(Exception):
    """An error with a gRPC status code and a message for the caller."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(ServiceError):
    """A request field breaks a rule: the message is ``<field>: <rule>``."""

    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


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


class Unavailable(ServiceError):
    """A dependency is down or the work was lost mid-way; the message says whether to retry."""

    code = grpc.StatusCode.UNAVAILABLE


def require(condition: bool, field: str, rule: str) -> None:
    """Raises InvalidArgument(field, rule) unless ``condition`` holds."""
    if not condition:
        raise InvalidArgument(field, rule)
