"""Global queue orders (FCFS, SSJF, Gittins, LSTF, RT/BE), the bounded global queue, and its fair share between tenants."""

from forethought.queueing.fair_queue import FairQueue
from forethought.queueing.gittins import gittins_index
from forethought.queueing.global_queue import GlobalQueue, QueueFull
from forethought.queueing.policies import POLICY_NAMES, build_policy
from forethought.queueing.policy import QueuedRequest, QueuePolicy, engine_priority

__all__ = [
    "POLICY_NAMES",
    "FairQueue",
    "GlobalQueue",
    "QueueFull",
    "QueuePolicy",
    "QueuedRequest",
    "build_policy",
    "engine_priority",
    "gittins_index",
]
