"""Per-tenant admission on an injected clock: requests/s, tokens/min charged at finish, open streams."""

from __future__ import annotations

import pytest
from forethought.access import Quota, QuotaExceeded, QuotaLedger, Tenant, TokenBucket
from forethought.access.quota import STREAM_RETRY_S


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def refused(ledger: QuotaLedger, tenant: Tenant) -> QuotaExceeded:
    with pytest.raises(QuotaExceeded) as raised:
        ledger.admit(tenant)
    return raised.value


def test_a_bucket_refills_at_its_rate_up_to_its_capacity() -> None:
    bucket = TokenBucket(rate=2.0, capacity=4.0, now=0.0)
    bucket.take(4.0, 0.0)
    assert bucket.wait_for(1.0, 0.0) == 0.5
    assert bucket.level(1.0) == 2.0
    assert bucket.level(60.0) == 4.0
    bucket.take(10.0, 60.0)
    assert bucket.level(60.0) == -6.0 and bucket.wait_for(1.0, 60.0) == 3.5


def test_requests_per_s_admits_the_burst_then_says_when_to_retry() -> None:
    clock = Clock()
    ledger = QuotaLedger(clock)
    tenant = Tenant("a", Quota(requests_per_s=2.0, burst=3.0))
    for _ in range(3):
        ledger.admit(tenant)
        ledger.finish(tenant, 0)
    error = refused(ledger, tenant)
    assert error.limit == "requests_per_s (2)" and error.retry_after_s == pytest.approx(0.5)
    clock.now += 0.5
    ledger.admit(tenant)


def test_one_tenant_over_its_rate_leaves_another_untouched() -> None:
    ledger = QuotaLedger(Clock())
    a, b = Tenant("a", Quota(requests_per_s=1.0)), Tenant("b", Quota(requests_per_s=1.0))
    ledger.admit(a)
    refused(ledger, a)
    ledger.admit(b)


def test_tokens_per_min_charges_at_finish_and_waits_out_the_debt() -> None:
    clock = Clock()
    ledger = QuotaLedger(clock)
    tenant = Tenant("a", Quota(tokens_per_min=600))  # 10 tokens/s
    ledger.admit(tenant)
    ledger.admit(tenant)  # nothing charged yet: both run
    ledger.finish(tenant, 500)
    ledger.admit(tenant)  # 100 left
    ledger.finish(tenant, 300)  # 200 in debt
    ledger.finish(tenant, 0)
    error = refused(ledger, tenant)
    assert error.limit == "tokens_per_min (600)" and error.retry_after_s == pytest.approx(20.0)
    clock.now += 20.0 + 1e-6
    ledger.admit(tenant)


def test_max_streams_counts_open_streams_until_they_finish() -> None:
    ledger = QuotaLedger(Clock())
    tenant = Tenant("a", Quota(max_streams=2))
    ledger.admit(tenant)
    ledger.admit(tenant)
    error = refused(ledger, tenant)
    assert error.limit == "max_streams (2 open)" and error.retry_after_s == STREAM_RETRY_S
    assert ledger.open_streams("a") == 2
    ledger.finish(tenant, 10)
    ledger.admit(tenant)
    assert ledger.open_streams("a") == 2


def test_a_refusal_counts_nothing() -> None:
    clock = Clock()
    ledger = QuotaLedger(clock)
    tenant = Tenant("a", Quota(requests_per_s=1.0, max_streams=1))
    ledger.admit(tenant)
    ledger.finish(tenant, 0)
    refused(ledger, tenant)  # by rate: the stream count stays 0
    assert ledger.open_streams("a") == 0
    clock.now += 1.0
    ledger.admit(tenant)


def test_no_limits_admit_everything() -> None:
    ledger = QuotaLedger(Clock())
    tenant = Tenant("open", Quota())
    for _ in range(1000):
        ledger.admit(tenant)
    assert ledger.open_streams("open") == 1000
