"""The worker registry in Redis: who serves what, where, how loaded, and whether it is alive.

Key layout (``ns`` is the configured namespace):
- ``{ns}:workers``: a set of worker ids ever registered and not yet cleaned up.
- ``{ns}:worker:{id}``: a hash (address, model, engine, capacity, state, heartbeat_s, load as JSON, and
  the writing process's ``instance`` token) with a TTL of ``ttl_s``; each heartbeat rewrites it and renews
  the TTL, so a dead worker's entry expires by itself and readers drop its id from the set.

An id names one live worker: a heartbeat or a deregistration changes an entry only when the entry is
missing or carries the writer's own instance token, so a worker that lost its id (frozen past its TTL
while another took the id) learns so and cannot overwrite or delete the new holder's entry. A worker that
takes an id over names the token of the entry it judged dead: the take-over is one compare-and-set, so of
two workers that start under one id at once only the first to register gets it.

A reader skips an entry it cannot read (logged once per worker) rather than the whole list, and ignores
load fields it does not know: during a rolling upgrade a newer worker's entry may carry more.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields

import redis.asyncio as aioredis

from forethought.domain import ClassLoad, EngineStats

log = logging.getLogger(__name__)

UNREADABLE = (KeyError, ValueError, TypeError)  # what reading an entry with a missing or bad field raises

HEARTBEAT = """
local holder = redis.call('HGET', KEYS[1], 'instance')
if holder ~= false and holder ~= ARGV[1] and holder ~= ARGV[3] then
  return 0
end
redis.call('HSET', KEYS[1], 'instance', ARGV[1], unpack(ARGV, 5))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[4])
return 1
"""
"""Writes worker ARGV[4]'s entry (KEYS[1]: ARGV[5..] field-value pairs, instance ARGV[1], TTL ARGV[2] ms) and
lists it (KEYS[2]), unless an instance other than ARGV[1] and ARGV[3] (the one being taken over) holds the entry."""

DEREGISTER = """
local holder = redis.call('HGET', KEYS[1], 'instance')
if holder ~= false and holder ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
return 1
"""
"""Deletes worker ARGV[2]'s entry (KEYS[1]) and unlists it (KEYS[2]), unless another instance than ARGV[1] holds it."""


@dataclass(frozen=True)
class WorkerRecord:
    worker_id: str
    address: str
    model: str
    engine: str
    capacity: int
    state: str = "serving"  # "serving" or "draining"
    heartbeat_s: float = 0.0
    load: EngineStats = EngineStats()


@dataclass(frozen=True)
class Holding:
    """A live entry and the instance token of its writer: what a take-over names (``heartbeat``'s ``taking_over``)."""

    record: WorkerRecord
    instance: str


def stats_to_json(stats: EngineStats) -> str:
    return json.dumps(asdict(stats))


def stats_from_json(text: str) -> EngineStats:
    """The load a worker published; fields this version does not know are ignored."""
    raw = json.loads(text)
    raw["rt"] = ClassLoad(**_known(ClassLoad, raw.get("rt", {})))
    raw["be"] = ClassLoad(**_known(ClassLoad, raw.get("be", {})))
    return EngineStats(**_known(EngineStats, raw))


def _known(kind: type, raw: Mapping[str, object]) -> dict[str, object]:
    names = {field.name for field in fields(kind)}
    return {name: value for name, value in raw.items() if name in names}


class WorkerRegistry:
    """Registers, heartbeats and lists workers in Redis."""

    def __init__(self, client: aioredis.Redis, namespace: str, ttl_s: float = 6.0,
                 clock: Callable[[], float] = time.time, instance: str | None = None) -> None:
        self._redis = client
        self._ns = namespace
        self._ttl_ms = int(ttl_s * 1000)
        self._clock = clock
        self.instance = instance or uuid.uuid4().hex  # this writer's token in the entries it writes
        self._heartbeat_script = client.register_script(HEARTBEAT)
        self._deregister_script = client.register_script(DEREGISTER)
        self._unreadable: set[str] = set()  # ids whose entry could not be read, logged once

    def _key(self, worker_id: str) -> str:
        return f"{self._ns}:worker:{worker_id}"

    async def heartbeat(self, record: WorkerRecord, taking_over: str = "") -> bool:
        """Writes the record with a fresh heartbeat time and TTL (registering it if new); False, writing
        nothing, when another instance holds the entry, unless it is ``taking_over`` (an instance token
        from ``holding``)."""
        entry = {
            "address": record.address, "model": record.model, "engine": record.engine,
            "capacity": record.capacity, "state": record.state, "heartbeat_s": self._clock(),
            "load": stats_to_json(record.load),
        }
        fields = [value for pair in entry.items() for value in pair]
        keys = [self._key(record.worker_id), f"{self._ns}:workers"]
        args = [self.instance, self._ttl_ms, taking_over, record.worker_id, *fields]
        return bool(await self._heartbeat_script(keys=keys, args=args))

    async def deregister(self, worker_id: str) -> bool:
        """Deletes the worker's entry; False, deleting nothing, when another instance holds it."""
        keys = [self._key(worker_id), f"{self._ns}:workers"]
        return bool(await self._deregister_script(keys=keys, args=[self.instance, worker_id]))

    async def entry(self, worker_id: str) -> WorkerRecord | None:
        """``worker_id``'s entry while it lives (its TTL not run out), else None; None too when unreadable."""
        held = await self.holding(worker_id)
        return held.record if held else None

    async def holding(self, worker_id: str) -> Holding | None:
        """``worker_id``'s entry with the token of the instance that wrote it, read at once; None as ``entry``."""
        entry = {_text(key): _text(value) for key, value in (await self._redis.hgetall(self._key(worker_id))).items()}
        try:
            return Holding(_record(worker_id, entry), entry.get("instance", "")) if entry else None
        except UNREADABLE:
            return None

    async def workers(self) -> list[WorkerRecord]:
        """Live workers, sorted by id; ids whose entry expired are removed from the set."""
        ids = sorted(member.decode() if isinstance(member, bytes) else member
                     for member in await self._redis.smembers(f"{self._ns}:workers"))
        async with self._redis.pipeline(transaction=False) as pipe:
            for worker_id in ids:
                pipe.hgetall(self._key(worker_id))
            entries = await pipe.execute()
        live, dead = [], []
        for worker_id, entry in zip(ids, entries):
            if not entry:
                dead.append(worker_id)
                self._unreadable.discard(worker_id)
                continue
            try:
                live.append(_record(worker_id, entry))
                self._unreadable.discard(worker_id)
            except UNREADABLE as error:  # one bad entry must not hide every worker
                if worker_id not in self._unreadable:
                    self._unreadable.add(worker_id)
                    log.warning("worker %s: its registry entry cannot be read (%s: %s); it is left out",
                                worker_id, type(error).__name__, error)
        if dead:
            await self._redis.srem(f"{self._ns}:workers", *dead)
        return live


def with_recent_heartbeats(known: Mapping[str, WorkerRecord], listed: Sequence[WorkerRecord], now: float,
                           ttl_s: float) -> list[WorkerRecord]:
    """The listed workers, plus the known ones the listing lacks whose last heartbeat is younger than
    ``ttl_s``: a registry that lost its entries (Redis restarted or flushed) gets them back at the next
    heartbeat, and a worker seen alive a moment ago is not dropped meanwhile. Sorted by id."""
    listed_ids = {record.worker_id for record in listed}
    recent = [record for worker_id, record in known.items()
              if worker_id not in listed_ids and now - record.heartbeat_s < ttl_s]
    return sorted([*listed, *recent], key=lambda record: record.worker_id)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _record(worker_id: str, raw: Mapping[bytes | str, bytes | str]) -> WorkerRecord:
    """The record of an entry as Redis returns it; raises one of ``UNREADABLE`` when a field is missing or bad."""
    entry = {_text(key): _text(value) for key, value in raw.items()}
    return WorkerRecord(
        worker_id=worker_id, address=entry["address"], model=entry["model"], engine=entry["engine"],
        capacity=int(entry["capacity"]), state=entry.get("state", "serving"),
        heartbeat_s=float(entry.get("heartbeat_s", 0.0)), load=stats_from_json(entry.get("load", "{}")),
    )
