"""The global prefix index in Redis (Preble section 4.1's global prefix tree, shared by scheduler replicas).

Same meaning as ``InMemoryPrefixIndex``: workers' cache events go in, a prompt's block hashes come out
as "worker -> leading blocks cached". All state lives in Redis, so any number of scheduler replicas see
one index. Every operation is one Lua script call (one round trip, atomic on the server); the key layout
is a contract with the workers that publish events and is documented in ``docs/prefix-index.md``:

    {ns}:blk:<hash>          HASH  worker -> last access, ms since epoch (store or match)
    {ns}:wblk:<worker>       SET   block hashes the worker caches (for matching, clears and removal)
    {ns}:alive:<worker>      STRING heartbeat with a TTL; a worker without it is ignored by match
    {ns}:workers             SET   every worker that ever published (for sweeping dead ones)

``{ns}`` is a Redis Cluster hash tag, so every key of one namespace lives in one slot and scripts may
touch keys they discover while running.

A match is the scheduler's hot path: its command (one argument per block hash) is packed by hiredis in C
and written on a pooled connection, since redis-py's Python packer costs about as much as the rest of
the round trip for a long prompt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import hiredis
from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from forethought.domain import AllBlocksCleared, BlockRemoved, BlockStored, CacheEvent

_APPLY = """
local ns, worker, now = ARGV[1], ARGV[2], ARGV[3]
local wblk = ns .. ':wblk:' .. worker
redis.call('SADD', ns .. ':workers', worker)
local op = nil
for i = 4, #ARGV do
  local token = ARGV[i]
  if token == 'S' or token == 'R' then
    op = token
  elseif token == 'C' then
    for _, h in ipairs(redis.call('SMEMBERS', wblk)) do
      redis.call('HDEL', ns .. ':blk:' .. h, worker)
    end
    redis.call('DEL', wblk)
  elseif op == 'S' then
    redis.call('HSET', ns .. ':blk:' .. token, worker, now)
    redis.call('SADD', wblk, token)
  else
    redis.call('HDEL', ns .. ':blk:' .. token, worker)
    redis.call('SREM', wblk, token)
  end
end
return 1
"""

_MATCH = """
local ns, now = ARGV[1], ARGV[2]
-- Leading blocks ARGV[first..last] that the worker's set holds: one SMISMEMBER per 1000 blocks.
local function leading(wblk, first, last)
  local depth = 0
  for from = first, last, 1000 do
    local held = redis.call('SMISMEMBER', wblk, unpack(ARGV, from, math.min(from + 999, last)))
    for _, flag in ipairs(held) do
      if flag ~= 1 then return depth end
      depth = depth + 1
    end
  end
  return depth
end
local out, at = {}, 3
while at <= #ARGV do
  local first, last = at + 1, at + tonumber(ARGV[at])
  at = last + 1
  local holders, matched = redis.call('HKEYS', ns .. ':blk:' .. ARGV[first]), {}
  if #holders > 0 then
    local keys = {}
    for i, w in ipairs(holders) do keys[i] = ns .. ':alive:' .. w end
    local alive = redis.call('MGET', unpack(keys))
    for i, w in ipairs(holders) do
      if alive[i] then matched[#matched + 1] = w end
    end
  end
  out[#out + 1] = #matched
  for _, w in ipairs(matched) do
    local depth = leading(ns .. ':wblk:' .. w, first, last)
    local deepest = ARGV[first + depth - 1]
    redis.call('HSET', ns .. ':blk:' .. deepest, w, now)
    out[#out + 1] = w
    out[#out + 1] = depth
  end
end
return out
"""

_REPUBLISH_CHUNK = 4096  # block hashes per script call: one call stays short for the server's other clients

_REFRESH = """
local ns, worker, ttl = ARGV[1], ARGV[2], ARGV[3]
local known = redis.call('EXISTS', ns .. ':alive:' .. worker)
redis.call('SET', ns .. ':alive:' .. worker, '1', 'PX', ttl)
redis.call('SADD', ns .. ':workers', worker)
return known
"""

_REMOVE = """
local ns, worker = ARGV[1], ARGV[2]
local wblk = ns .. ':wblk:' .. worker
for _, h in ipairs(redis.call('SMEMBERS', wblk)) do
  redis.call('HDEL', ns .. ':blk:' .. h, worker)
end
redis.call('DEL', wblk, ns .. ':alive:' .. worker)
redis.call('SREM', ns .. ':workers', worker)
return 1
"""


class RedisPrefixIndex:
    """Block hash -> caching workers, with each worker's last access, in Redis.

    Args:
        client: a ``redis.asyncio.Redis`` (``decode_responses`` either way).
        namespace: prefix of every key (``{namespace}:...``).
        clock: seconds since the epoch; injected so tests and replays control time.
    """

    def __init__(
        self,
        client: Redis,
        namespace: str = "forethought",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._ns = "{" + namespace + "}"
        self._clock = clock
        self._scripts = {"apply": _APPLY, "match": _MATCH, "refresh": _REFRESH, "remove": _REMOVE}
        self._shas: dict[str, str] = {}

    @property
    def key_prefix(self) -> str:
        return self._ns

    async def load_scripts(self) -> None:
        """Loads the Lua scripts (once per server; afterwards every call is a single EVALSHA)."""
        for name, source in self._scripts.items():
            self._shas[name] = str(_text(await self._client.script_load(source)))

    async def apply(self, worker_id: str, events: Iterable[CacheEvent]) -> None:
        """Applies a worker's cache events in order, atomically."""
        tokens: list[str] = []
        for event in events:
            if isinstance(event, BlockStored):
                tokens += ["S", *map(str, event.block_hashes)]
            elif isinstance(event, BlockRemoved):
                tokens += ["R", *map(str, event.block_hashes)]
            elif isinstance(event, AllBlocksCleared):
                tokens.append("C")
        if tokens:
            await self._run("apply", worker_id, self._now_ms(), *tokens)

    async def match(self, block_hashes: Sequence[int]) -> dict[str, int]:
        """Live worker -> leading blocks of the prompt it caches; records each one's access.

        The last access is written on the deepest block each worker matched: an access to a block
        implies one to its ancestors, so one write per worker keeps matching one round trip.
        """
        return (await self.match_many([block_hashes]))[0]

    async def match_many(self, prompts: Sequence[Sequence[int]]) -> list[dict[str, int]]:
        """``match`` for several prompts in one round trip (one script call), in order."""
        sent = [hashes for hashes in prompts if hashes]
        if not sent:
            return [{} for _ in prompts]
        args: list[int] = []  # per prompt: its number of blocks, then their hashes
        for hashes in sent:
            args.append(len(hashes))
            args.extend(hashes)
        reply = iter(await self._run("match", self._now_ms(), *args, packed=True))
        return [_cached_workers(reply) if hashes else {} for hashes in prompts]

    async def refresh_worker(self, worker_id: str, ttl_s: float) -> bool:
        """Heartbeat: the worker's entries count for ``ttl_s`` more seconds. False when the index did not
        know the worker as alive: its first heartbeat, or the index lost it (Redis restarted or flushed,
        or a late heartbeat let it be swept), so whatever it published before is gone."""
        return bool(await self._run("refresh", worker_id, max(1, int(ttl_s * 1000))))

    async def republish(self, worker_id: str, block_hashes: Sequence[int]) -> None:
        """Stores the worker's whole cached set again, in chunks (an index that lost it)."""
        for start in range(0, len(block_hashes), _REPUBLISH_CHUNK):
            chunk = block_hashes[start:start + _REPUBLISH_CHUNK]
            await self._run("apply", worker_id, self._now_ms(), "S", *map(str, chunk))

    async def remove_worker(self, worker_id: str) -> None:
        """Forgets every block of the worker and its heartbeat."""
        await self._run("remove", worker_id)

    async def holders(self, block_hash: int) -> dict[str, float]:
        """Live workers caching the block -> last access (seconds since the epoch)."""
        entries = await self._client.hgetall(f"{self._ns}:blk:{block_hash}")
        alive = await self._alive([_text(w) for w in entries])
        return {_text(w): int(ms) / 1000 for w, ms in entries.items() if _text(w) in alive}

    async def sweep_dead_workers(self) -> list[str]:
        """Removes every worker whose heartbeat expired; returns them (run periodically, any replica)."""
        workers = [_text(w) for w in await self._client.smembers(f"{self._ns}:workers")]
        alive = await self._alive(workers)
        dead = sorted(set(workers) - alive)
        for worker_id in dead:
            await self.remove_worker(worker_id)
        return dead

    async def _alive(self, workers: list[str]) -> set[str]:
        if not workers:
            return set()
        async with self._client.pipeline(transaction=False) as pipe:
            for worker_id in workers:
                pipe.exists(f"{self._ns}:alive:{worker_id}")
            found = await pipe.execute()
        return {w for w, present in zip(workers, found, strict=True) if present}

    async def _run(self, name: str, *args: Any, packed: bool = False) -> Any:
        if name not in self._shas:
            await self.load_scripts()
        try:
            return await self._evalsha(self._shas[name], args, packed)
        except NoScriptError:  # the server restarted and lost its script cache
            await self.load_scripts()
            return await self._evalsha(self._shas[name], args, packed)

    async def _evalsha(self, sha: str, args: tuple[Any, ...], packed: bool) -> Any:
        """One ``EVALSHA``; ``packed``: the command packed by hiredis (the same bytes as redis-py's packer, in C)."""
        if not packed:
            return await self._client.evalsha(sha, 0, self._ns, *args)
        pool = self._client.connection_pool
        connection = await pool.get_connection()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
        try:
            await connection.send_packed_command(hiredis.pack_command(("EVALSHA", sha, 0, self._ns, *args)))
            return await connection.read_response()
        finally:
            await pool.release(connection)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)


def _cached_workers(reply: Iterator[Any]) -> dict[str, int]:
    """One prompt's part of a match reply: the count of workers, then worker and depth for each."""
    count = int(next(reply))
    return {_text(next(reply)): int(next(reply)) for _ in range(count)}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
