"""Which scheduler replica holds a request, in Redis, so ``Cancel`` works whichever replica receives it.

Replicas share one Redis (Preble section 4.1's global scheduler, run as several processes). A replica
records ``<namespace>:owner:<request id> = <replica id>`` with a TTL when it accepts a request, refreshes
the records of the requests it still holds every third of the TTL, and deletes them when they end; a
replica that dies leaves records that expire. Records are written in one pipeline per ``flush_interval_s``
(50 ms), off the requests' path; a request that ends before its record was written costs no write at
all. A ``Cancel`` for an id the receiving replica does not hold is forwarded to the owner over Redis:
published on the owner's channel with a reply key, answered there by a push to that key. The ids are
the scheduler's own (``<tenant>/<id>`` with tenants), so a tenant reaches only its own requests on any
replica.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from forethought.rpc.errors import Unavailable

log = logging.getLogger(__name__)

LocalCancel = Callable[[str], Awaitable[bool]]
"""Cancels a request this replica holds; False when it is unknown or already finished."""


class RequestOwners:
    """This replica's records of the requests it holds, and the forwarding of ``Cancel`` between replicas.

    Args:
        redis: the shared Redis.
        namespace: the mesh's key namespace.
        ttl_s: how long a record outlives its last refresh (a dead replica's records go after this).
        answer_timeout_s: how long a forwarded cancel waits for the owner's answer.
        flush_interval_s: how often the records of accepted and ended requests are written, in one pipeline.
    """

    def __init__(self, redis: aioredis.Redis, namespace: str, ttl_s: float = 30.0, answer_timeout_s: float = 2.0,
                 flush_interval_s: float = 0.05) -> None:
        self.replica_id = uuid.uuid4().hex[:12]
        self.flush_interval_s = flush_interval_s
        self._redis = redis
        self._namespace = namespace
        self._ttl_ms = round(ttl_s * 1000)
        self._answer_timeout_s = answer_timeout_s
        self._held: set[str] = set()
        self._unwritten: set[str] = set()  # held, record not yet written
        self._ended: set[str] = set()  # record written, request since ended

    def hold(self, request_id: str) -> None:
        """This replica accepted the request: its record is written at the next flush."""
        self._held.add(request_id)
        self._unwritten.add(request_id)

    def release(self, request_id: str) -> None:
        """The request ended here: its record is deleted at the next flush (never written, if it was not yet)."""
        self._held.discard(request_id)
        if request_id in self._unwritten:
            self._unwritten.discard(request_id)
        else:
            self._ended.add(request_id)

    async def flush(self) -> None:
        """Writes the records of requests accepted and deletes those of requests ended since the last flush.

        A failed write is retried at the next flush; a cancel meanwhile reaches only this replica.
        """
        if not self._unwritten and not self._ended:
            return
        written, ended = self._unwritten, self._ended
        self._unwritten, self._ended = set(), set()
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for request_id in written:
                    pipe.set(self._key(request_id), self.replica_id, px=self._ttl_ms)
                if ended:
                    pipe.delete(*(self._key(request_id) for request_id in ended))
                await pipe.execute()
        except RedisError as error:
            self._unwritten |= written & self._held
            self._ended |= ended
            log.debug("owner records not written: %s", error)

    async def refresh(self) -> None:
        """Renews the records of every request still held (call every third of the TTL)."""
        if not self._held:
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            for request_id in self._held:
                pipe.set(self._key(request_id), self.replica_id, px=self._ttl_ms)
            await pipe.execute()

    async def forward_cancel(self, request_id: str) -> bool:
        """Cancels a request another replica holds; False when no live replica holds it.

        Raises:
            Unavailable: Redis or the owning replica did not answer in time (the caller may retry).
        """
        try:
            owner = await self._redis.get(self._key(request_id))
            if owner is None or owner.decode() == self.replica_id:
                return False
            reply_key = f"{self._namespace}:cancel-reply:{uuid.uuid4().hex}"
            message = json.dumps({"request_id": request_id, "reply": reply_key})
            if not await self._redis.publish(self._channel(owner.decode()), message):
                return False  # the owner is gone, and its requests with it
            answer = await self._redis.blpop([reply_key], timeout=self._answer_timeout_s)
        except RedisError as error:
            raise Unavailable(f"cannot find the replica holding request {request_id!r}: Redis failed ({error}); retry") from error
        if answer is None:
            raise Unavailable(f"the replica holding request {request_id!r} did not answer the cancel; retry")
        return bool(answer[1] == b"1")

    async def serve_cancels(self, cancel: LocalCancel) -> None:
        """Answers the cancels other replicas forward to this one, until cancelled."""
        pubsub = self._redis.pubsub()
        await pubsub.subscribe(self._channel(self.replica_id))
        try:
            async for message in pubsub.listen():
                if message["type"] == "message":
                    await self._answer(json.loads(message["data"]), cancel)
        finally:
            await pubsub.aclose()

    async def _answer(self, message: dict[str, str], cancel: LocalCancel) -> None:
        try:
            cancelled = await cancel(message["request_id"])
        except Exception:
            log.warning("a forwarded cancel of %s failed here", message["request_id"], exc_info=True)
            return  # the forwarding replica's wait ends in UNAVAILABLE, which says to retry
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.rpush(message["reply"], b"1" if cancelled else b"0")
            pipe.expire(message["reply"], 10)  # a forwarder that gave up leaves no key behind
            await pipe.execute()

    def _key(self, request_id: str) -> str:
        return f"{self._namespace}:owner:{request_id}"

    def _channel(self, replica_id: str) -> str:
        return f"{self._namespace}:cancels:{replica_id}"
