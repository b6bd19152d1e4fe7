"""The client's retry decision: which failures are tried again, after how long, and when it gives up."""

from __future__ import annotations

import pytest
from forethought.client import RetryPolicy, retry_delay

POLICY = RetryPolicy(max_attempts=4, initial_backoff_s=0.2, max_backoff_s=1.0, multiplier=2.0)


@pytest.mark.parametrize(("attempt", "code", "server_delay_s", "streamed", "remaining_s", "expected"), [
    (1, "UNAVAILABLE", None, False, None, 0.2),
    (2, "UNAVAILABLE", None, False, None, 0.4),
    (3, "UNAVAILABLE", None, False, None, 0.8),
    (1, "RESOURCE_EXHAUSTED", 0.75, False, None, 0.75),
    (1, "RESOURCE_EXHAUSTED", 3.0, False, 10.0, 3.0),
    (1, "RESOURCE_EXHAUSTED", 3.0, False, 2.5, None),
    (1, "UNAVAILABLE", None, False, 0.1, None),
    (1, "UNAVAILABLE", None, True, None, None),
    (1, "RESOURCE_EXHAUSTED", 0.1, True, None, None),
    (4, "UNAVAILABLE", None, False, None, None),
    (1, "INVALID_ARGUMENT", None, False, None, None),
    (1, "DEADLINE_EXCEEDED", None, False, None, None),
    (1, "NOT_FOUND", None, False, None, None),
    (1, "INTERNAL", None, False, None, None),
], ids=["backoff-1", "backoff-2", "backoff-3", "server-hint", "server-hint-fits", "server-hint-past-deadline",
        "backoff-past-deadline", "after-a-token", "full-after-a-token", "attempts-spent", "bad-field", "deadline",
        "not-found", "internal"])
def test_retry_delay(attempt, code, server_delay_s, streamed, remaining_s, expected):
    assert retry_delay(POLICY, attempt, code, server_delay_s, streamed, remaining_s) == expected


def test_the_backoff_is_capped():
    assert [POLICY.backoff_s(attempt) for attempt in range(1, 6)] == [0.2, 0.4, 0.8, 1.0, 1.0]


def test_one_attempt_never_retries():
    assert retry_delay(RetryPolicy(max_attempts=1), 1, "UNAVAILABLE", 0.1, False, None) is None


@pytest.mark.parametrize("options", [{"max_attempts": 0}, {"initial_backoff_s": 2.0, "max_backoff_s": 1.0},
                                     {"initial_backoff_s": -1.0}, {"multiplier": 0.5}],
                         ids=["no-attempts", "initial-above-max", "negative", "shrinking"])
def test_a_policy_that_cannot_work_is_refused(options):
    with pytest.raises(ValueError):
        RetryPolicy(**options)
