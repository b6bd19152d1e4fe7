"""Global queue orders (FCFS, SSJF, Gittins, LSTF, RT/BE) and the bounded global queue."""

from forethought.queueing.gittins import gittins_index
from forethought.queueing.global_queue import GlobalQueue, QueueFull
from forethought.queueing.policies import POLICY_NAMES, build_policy
from forethought.queueing.policy import QueuedRequest, QueuePolicy, engine_priority

__all__ = [
    "POLICY_NAMES",
    "GlobalQueue",
    "QueueFull",
    "QueuePolicy",
    "QueuedRequest",
    "build_policy",
    "engine_priority",
    "gittins_index",
]
