"""SharedRates on a real Redis: the Lua buckets admit, refuse with a delay, charge tokens, and fail open."""

from __future__ import annotations

import uuid

import pytest
import redis.asyncio as aioredis
from forethought.access import Quota, QuotaExceeded, Tenant
from forethought.cluster.redis_server import RedisProcess
from forethought.services.scheduler.shared_rates import SharedRates


@pytest.fixture
async def client(redis_server: RedisProcess):
    opened = aioredis.from_url(redis_server.url)
    yield opened
    await opened.aclose()


async def test_two_ledgers_share_one_request_bucket(client) -> None:
    namespace = f"rates-{uuid.uuid4().hex[:8]}"
    first, second = SharedRates(client, namespace), SharedRates(client, namespace)
    tenant = Tenant("a", Quota(requests_per_s=0.5, burst=2))
    await first.admit(tenant)
    await second.admit(tenant)
    with pytest.raises(QuotaExceeded) as refused:
        await first.admit(tenant)
    assert refused.value.limit == "requests_per_s (0.5)"
    assert 1.5 < refused.value.retry_after_s <= 2.0
    await SharedRates(client, namespace + "-other").admit(tenant)  # another namespace, another bucket


async def test_tokens_charged_on_one_replica_hold_on_another(client) -> None:
    namespace = f"rates-{uuid.uuid4().hex[:8]}"
    first, second = SharedRates(client, namespace), SharedRates(client, namespace)
    tenant = Tenant("a", Quota(tokens_per_min=600))  # 10 tokens/s
    await first.admit(tenant)
    await first.charge(tenant, 800)  # 200 in debt
    with pytest.raises(QuotaExceeded) as refused:
        await second.admit(tenant)
    assert refused.value.limit == "tokens_per_min (600)"
    assert 19.0 < refused.value.retry_after_s <= 20.0


async def test_an_unreachable_redis_lifts_the_rates() -> None:
    unreachable = aioredis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    rates = SharedRates(unreachable, "rates-down")
    tenant = Tenant("a", Quota(requests_per_s=0.001, burst=1, tokens_per_min=1))
    for _ in range(3):
        await rates.admit(tenant)
    await rates.charge(tenant, 100)
    await unreachable.aclose()
