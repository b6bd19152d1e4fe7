"""The cost-model executor: an iteration takes the time its profile models (BROS section 4.1).

It runs nothing; the caller advances its clock (virtual in the simulator, real in ``SimEngineBackend``) by
the returned duration. Being pure, the same model doubles as the scheduler's estimate.
"""

from __future__ import annotations

from forethought.costmodel.profiles import CostProfile
from forethought.engine.executor import BatchShape


class CostModelExecutor:
    """``Executor`` and ``IterationEstimator`` backed by a ``CostProfile``."""

    def __init__(self, profile: CostProfile) -> None:
        self.profile = profile

    def iteration_time(self, batch: BatchShape) -> float:
        return self.profile.iteration_time(batch)

    def estimate_iteration_time(self, batch: BatchShape) -> float:
        return self.profile.iteration_time(batch)
