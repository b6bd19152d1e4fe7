"""The scheduler's view of the workers: registry records, one channel each, refreshed from Redis."""

from __future__ import annotations

import logging

import grpc

from forethought.cluster.registry import WorkerRecord
from forethought.rpc.channels import open_channel
from forethought.v1 import worker_pb2_grpc

log = logging.getLogger(__name__)


class WorkerPool:
    """Live workers by id with their stubs; ``refresh`` applies the registry's current list."""

    def __init__(self) -> None:
        self.records: dict[str, WorkerRecord] = {}
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, worker_pb2_grpc.WorkerServiceStub] = {}
        self._closing: list[grpc.aio.Channel] = []  # channels of departed workers, closed at shutdown

    def refresh(self, records: list[WorkerRecord]) -> tuple[list[str], list[str]]:
        """Adopts ``records``; returns (added ids, removed ids). Draining workers count as removed."""
        serving = {record.worker_id: record for record in records if record.state == "serving"}
        added = [worker_id for worker_id in serving if worker_id not in self.records]
        removed = [worker_id for worker_id in self.records if worker_id not in serving]
        for worker_id in removed:
            self.records.pop(worker_id)
            channel = self._channels.pop(worker_id)
            # Streams still open on the channel must end on their own, and a request placed just before
            # the worker left must still fail over through it: the stub stays, the channel closes at shutdown.
            log.info("worker %s left the pool", worker_id)
            self._closing.append(channel)
        for worker_id in added:
            # Untraced: the servicer sends the trace context as metadata on every call (the hot path).
            self._channels[worker_id] = open_channel(serving[worker_id].address, traced=False)
            self._stubs[worker_id] = worker_pb2_grpc.WorkerServiceStub(self._channels[worker_id])
            log.info("worker %s joined the pool at %s", worker_id, serving[worker_id].address)
        self.records.update(serving)
        return added, removed

    def stub(self, worker_id: str) -> worker_pb2_grpc.WorkerServiceStub:
        return self._stubs[worker_id]

    def serves(self, model: str) -> bool:
        """Some serving worker has ``model`` (asked on every request, so it stops at the first)."""
        return any(record.model == model for record in self.records.values())

    async def close(self) -> None:
        for channel in [*self._channels.values(), *self._closing]:
            await channel.close()
        self._channels.clear()
        self._stubs.clear()
        self.records.clear()
        self._closing.clear()
