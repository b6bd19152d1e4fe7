"""When the client tries a failed call again, and after how long: a pure decision, tested on its own.

A call is retried only when no token has reached the caller (a second answer would repeat text already
shown), only for the statuses that say "try again" (UNAVAILABLE, RESOURCE_EXHAUSTED), at most
``max_attempts`` times in all, and only when the wait fits in what is left of the call's deadline. The wait
is the server's own hint (``google.rpc.RetryInfo``, sent with a full queue) when it gave one, else an
exponential backoff.
"""

from __future__ import annotations

from dataclasses import dataclass

RETRYABLE = frozenset({"UNAVAILABLE", "RESOURCE_EXHAUSTED"})
"""gRPC status names after which the same call may succeed."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a client retries; ``max_attempts=1`` never retries."""

    max_attempts: int = 3
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 5.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if not 0 <= self.initial_backoff_s <= self.max_backoff_s:
            raise ValueError("backoffs must satisfy 0 <= initial_backoff_s <= max_backoff_s")
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be >= 1, got {self.multiplier}")

    def backoff_s(self, attempt: int) -> float:
        """The wait after failed attempt number ``attempt`` (1-based) when the server gave no hint."""
        return min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (attempt - 1))


def retry_delay(policy: RetryPolicy, attempt: int, code: str, server_delay_s: float | None, streamed: bool,
                remaining_s: float | None) -> float | None:
    """Seconds to wait before attempt ``attempt + 1``, or None to give up and raise the error.

    Args:
        attempt: the attempt that failed, 1-based.
        code: its gRPC status name.
        server_delay_s: the server's ``RetryInfo`` delay, if it sent one.
        streamed: whether any chunk of this call already reached the caller.
        remaining_s: what is left of the call's deadline; None when it has none.
    """
    if streamed or code not in RETRYABLE or attempt >= policy.max_attempts:
        return None
    delay = server_delay_s if server_delay_s is not None else policy.backoff_s(attempt)
    if remaining_s is not None and delay >= remaining_s:
        return None  # the retry could not finish in time: the caller hears the real error now
    return max(0.0, delay)
