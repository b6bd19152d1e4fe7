"""The scheduler's view of the workers: registry records, one channel each, refreshed from Redis."""

from __future__ import annotations

import asyncio
import logging

import grpc

from forethought.cluster.registry import WorkerRecord
from forethought.rpc.channels import ChannelTls, check_health, open_channel
from forethought.v1 import worker_pb2_grpc

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 1.0
"""How long a worker missing from the registry has to answer a health check before it is given up."""


class WorkerPool:
    """The workers the registry lists, by id, with their stubs.

    Serving workers take new requests; draining ones keep their channel so their streams finish. A worker
    missing from the registry (its heartbeat expired, or it deregistered) is probed on its channel: if it
    does not answer a health check within ``probe_timeout_s`` it is dead to the scheduler, and its channel
    closes, which cuts the streams still open on it (a frozen process never breaks them itself) so their
    handlers fail over. One that answers keeps its channel while it stays missing: a Redis that restarted
    empty, or thawed after a stall longer than the heartbeat TTL, lists nobody until the next heartbeats,
    and must not cut every stream. A missing worker whose address a listed worker now holds is given up
    without a probe: the process at that address (a restart under a new id) would answer for it.
    """

    def __init__(self, probe_timeout_s: float = PROBE_TIMEOUT_S, tls: ChannelTls | None = None) -> None:
        self._tls = tls  # TLS to the workers when given (the scheduler's --tls-ca)
        self.records: dict[str, WorkerRecord] = {}  # listed at the last registry read
        self._probe_timeout_s = probe_timeout_s
        self._channels: dict[str, grpc.aio.Channel] = {}  # every worker not given up
        self._addresses: dict[str, str] = {}  # the address each channel was opened to
        self._stubs: dict[str, worker_pb2_grpc.WorkerServiceStub] = {}

    async def refresh(self, records: list[WorkerRecord]) -> list[str]:
        """Adopts the registry's list; returns the ids of the workers given up (their channels closed)."""
        listed = {record.worker_id: record for record in records}
        for worker_id, record in listed.items():
            if worker_id not in self._channels:
                # Untraced: the servicer sends the trace context as metadata on every call (the hot path).
                self._channels[worker_id] = open_channel(record.address, traced=False, tls=self._tls)
                self._stubs[worker_id] = worker_pb2_grpc.WorkerServiceStub(self._channels[worker_id])
                self._addresses[worker_id] = record.address
                log.info("worker %s joined the pool at %s", worker_id, record.address)
            elif worker_id in self.records and record.state != self.records[worker_id].state:
                log.info("worker %s is %s", worker_id, record.state)
        self.records = listed
        listed_addresses = {record.address for record in records}
        missing = [worker_id for worker_id in self._channels if worker_id not in listed]
        replaced = [worker_id for worker_id in missing if self._addresses[worker_id] in listed_addresses]
        probed = [worker_id for worker_id in missing if worker_id not in replaced]
        answers = await asyncio.gather(*(check_health(self._channels[w], timeout_s=self._probe_timeout_s) for w in probed))
        silent = [worker_id for worker_id, answer in zip(probed, answers, strict=True) if answer == "UNREACHABLE"]
        for worker_id in replaced + silent:
            del self._stubs[worker_id]
            del self._addresses[worker_id]
            await self._channels.pop(worker_id).close()
            log.warning("worker %s left the registry and %s: its channel is closed", worker_id,
                        "another worker now serves at its address" if worker_id in replaced else "does not answer")
        return replaced + silent

    def connected(self, worker_id: str) -> bool:
        """The worker's channel is open (it is listed, or missing but still answering)."""
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
        self._addresses.clear()
        self._stubs.clear()
        self.records.clear()
