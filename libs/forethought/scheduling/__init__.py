"""The global scheduler's pure core: request life, per-worker room, dispatch and failover (Preble 4.1-4.2)."""

from forethought.scheduling.degradation import DependencyHealth, Health
from forethought.scheduling.dispatcher import WORKER_LOSS_CODES, Dispatcher, Failover
from forethought.scheduling.request import PlacementStatus, ScheduledRequest
from forethought.scheduling.slots import WorkerSlots, WorkerView

__all__ = [
    "WORKER_LOSS_CODES",
    "DependencyHealth",
    "Dispatcher",
    "Failover",
    "Health",
    "PlacementStatus",
    "ScheduledRequest",
    "WorkerSlots",
    "WorkerView",
]
