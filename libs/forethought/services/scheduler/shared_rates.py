"""Tenants' requests/s and tokens/min buckets shared by every scheduler replica, in Redis.

The same token buckets as ``forethought.access.TokenBucket``, kept as two Redis hashes per tenant and
updated by Lua scripts on Redis's own clock (``TIME``), so replicas with skewed clocks agree and a tenant
gets its rates across the whole front door, not per replica. Admission checks both buckets and takes one
request in one atomic step; a finished request's tokens are charged afterwards. Open streams stay counted
per replica (``QuotaLedger``). When Redis fails, the rates are not enforced until it answers again (logged):
a Redis outage lifts the rate limits rather than refusing every tenant.
"""

from __future__ import annotations

import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

from forethought.access import QuotaExceeded, Tenant

log = logging.getLogger(__name__)

_LEVEL = """
local function level(key, rate, capacity, now)
  local stored = redis.call('HMGET', key, 'level', 'at')
  local value = tonumber(stored[1]) or capacity
  local at = tonumber(stored[2]) or now
  return math.min(capacity, value + math.max(0, now - at) * rate)
end
local function store(key, value, now, rate, capacity)
  redis.call('HSET', key, 'level', tostring(value), 'at', tostring(now))
  redis.call('PEXPIRE', key, math.ceil(2000 * (capacity + math.max(0, -value)) / rate) + 1000)
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1e6
"""

ADMIT = _LEVEL + """
-- KEYS: requests bucket, tokens bucket; ARGV: requests rate, burst, tokens rate, tokens capacity (0 = no limit)
local request_rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local token_rate, token_capacity = tonumber(ARGV[3]), tonumber(ARGV[4])
if token_rate > 0 then
  local tokens = level(KEYS[2], token_rate, token_capacity, now)
  if tokens <= 0 then return {'tokens_per_min', tostring((1e-9 - tokens) / token_rate)} end
end
if request_rate > 0 then
  local requests = level(KEYS[1], request_rate, burst, now)
  if requests < 1 then return {'requests_per_s', tostring((1 - requests) / request_rate)} end
  store(KEYS[1], requests - 1, now, request_rate, burst)
end
return {}
"""

CHARGE = _LEVEL + """
-- KEYS: tokens bucket; ARGV: tokens rate, tokens capacity, tokens used
local rate, capacity = tonumber(ARGV[1]), tonumber(ARGV[2])
store(KEYS[1], level(KEYS[1], rate, capacity, now) - tonumber(ARGV[3]), now, rate, capacity)
return 1
"""


class SharedRates:
    """Requests/s and tokens/min of every tenant, across replicas.

    Args:
        client: the scheduler's Redis.
        namespace: prefix of the keys (``{namespace}:tenant:<name>:requests`` and ``...:tokens``).
    """

    def __init__(self, client: Redis, namespace: str) -> None:
        self._ns = "{" + namespace + "}"
        self._admit = client.register_script(ADMIT)
        self._charge = client.register_script(CHARGE)

    async def admit(self, tenant: Tenant) -> None:
        """Takes one request from the tenant's shared bucket; QuotaExceeded (nothing taken) when over a rate."""
        quota = tenant.quota
        try:
            refused = await self._admit(keys=self._keys(tenant), args=[
                quota.requests_per_s, quota.request_burst, quota.tokens_per_min / 60.0, quota.tokens_per_min])
        except RedisError as error:
            log.warning("shared quotas unreachable (%s): tenant %s admitted without its rate limits", error, tenant.name)
            return
        if refused:
            limit, wait = (part.decode() if isinstance(part, bytes) else str(part) for part in refused)
            value = quota.requests_per_s if limit == "requests_per_s" else quota.tokens_per_min
            raise QuotaExceeded(tenant.name, f"{limit} ({value:g})", float(wait))

    async def charge(self, tenant: Tenant, tokens: int) -> None:
        """Charges a finished request's tokens to the tenant's shared tokens/min bucket."""
        quota = tenant.quota
        if not quota.tokens_per_min or tokens <= 0:
            return
        try:
            await self._charge(keys=self._keys(tenant)[1:], args=[quota.tokens_per_min / 60.0, quota.tokens_per_min, tokens])
        except RedisError as error:
            log.warning("shared quotas unreachable (%s): %d tokens of tenant %s not charged", error, tokens, tenant.name)

    def _keys(self, tenant: Tenant) -> list[str]:
        return [f"{self._ns}:tenant:{tenant.name}:requests", f"{self._ns}:tenant:{tenant.name}:tokens"]
