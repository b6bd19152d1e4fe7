"""The scheduler's view of the workers: registry records, one channel each, refreshed from Redis."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import grpc

from forethought.cluster.registry import WorkerRecord
from forethought.rpc.channels import open_channel
from forethought.v1 import worker_pb2_grpc

log = logging.getLogger(__name__)


class WorkerPool:
    """The workers the registry lists, by id, with their stubs.

    Serving workers take new requests; draining ones keep their channel so their streams finish. A worker
    missing from the registry whose last heartbeat is older than ``heartbeat_ttl_s`` is dead to the
    scheduler: its channel closes, which cuts the streams still open on it (a frozen process never breaks
    them itself), and their handlers fail over. One missing with a recent heartbeat keeps its channel: a
    Redis that restarted empty lists nobody until the next heartbeats, and must not cut every stream.
    Heartbeat times are the workers' clocks, assumed in step with this one (as worker health is).
    """

    def __init__(self, heartbeat_ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        self.records: dict[str, WorkerRecord] = {}  # listed at the last registry read
        self._heartbeat_ttl_s = heartbeat_ttl_s
        self._clock = clock
        self._known: dict[str, WorkerRecord] = {}  # listed, or missing with a heartbeat younger than the TTL
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, worker_pb2_grpc.WorkerServiceStub] = {}

    async def refresh(self, records: list[WorkerRecord]) -> list[str]:
        """Adopts the registry's list; returns the ids of the workers given up (their channels closed)."""
        now = self._clock()
        self.records = {record.worker_id: record for record in records}
        known = dict(self.records)
        gone = []
        for worker_id, record in self._known.items():
            if worker_id in known:
                if record.state != known[worker_id].state:
                    log.info("worker %s is %s", worker_id, known[worker_id].state)
            elif now - record.heartbeat_s <= self._heartbeat_ttl_s:
                known[worker_id] = record
            else:
                gone.append(worker_id)
        for worker_id, record in self.records.items():
            if worker_id not in self._channels:
                # Untraced: the servicer sends the trace context as metadata on every call (the hot path).
                self._channels[worker_id] = open_channel(record.address, traced=False)
                self._stubs[worker_id] = worker_pb2_grpc.WorkerServiceStub(self._channels[worker_id])
                log.info("worker %s joined the pool at %s", worker_id, record.address)
        self._known = known
        for worker_id in gone:
            del self._stubs[worker_id]
            await self._channels.pop(worker_id).close()
            log.warning("worker %s left the registry (heartbeat expired or deregistered): its channel is closed",
                        worker_id)
        return gone

    def connected(self, worker_id: str) -> bool:
        """The worker's channel is open (it is listed, or missing for less than the heartbeat TTL)."""
        return worker_id in self._channels

    def stub(self, worker_id: str) -> worker_pb2_grpc.WorkerServiceStub:
        """The worker's stub; KeyError once it was given up."""
        return self._stubs[worker_id]

    def serves(self, model: str) -> bool:
        """Some serving worker has ``model`` (asked on every request, so it stops at the first)."""
        return any(record.model == model and record.state == "serving" for record in self.records.values())

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
        self._stubs.clear()
        self.records.clear()
        self._known.clear()
