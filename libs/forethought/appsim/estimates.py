"""Demand estimates of the application simulator, cached per (application, unit, upstream bucket).

A Monte Carlo estimate of 1,000 walks costs tens of milliseconds, and a replay asks for one every time a
run enters a step. With refinement the estimate depends on the upstream unit's consumption only through
its buckets (and on the prompt length through its bucket), so runs in the same buckets share one
estimate; without refinement it depends on the unit alone. Each cached estimate draws its walks from
its own seeded generator, so a replay is deterministic and every policy sees the same estimates.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Mapping

from forethought.demand import (
    BUCKETS,
    Bucketing,
    DemandEstimate,
    DemandEstimator,
    DemandVariable,
    LlmSeconds,
    PDGraph,
    RunPosition,
)

CacheKey = tuple[object, ...]


class EstimateCache:
    """``DemandEstimator`` per application, and its estimates by bucketed position."""

    def __init__(self, graphs: Mapping[str, PDGraph], llm_seconds: LlmSeconds, refine: bool = True,
                 walks: int = 1000, seed: int = 0) -> None:
        self.refine = refine
        self.seed = seed
        self.estimators = {name: DemandEstimator(graph, llm_seconds, walks=walks, refine=refine)
                           for name, graph in graphs.items()}
        self._bucketing: dict[tuple[str, str, DemandVariable], Bucketing] = {}
        self._estimates: dict[CacheKey, DemandEstimate] = {}

    def estimate(self, application: str, position: RunPosition) -> DemandEstimate:
        key = self._key(application, position)
        if key not in self._estimates:
            rng = random.Random(zlib.crc32(repr(key).encode()) ^ self.seed)
            self._estimates[key] = self.estimators[application].estimate(position, rng)
        return self._estimates[key]

    @property
    def size(self) -> int:
        return len(self._estimates)

    def _key(self, application: str, position: RunPosition) -> CacheKey:
        if not self.refine:
            return (application, position.unit)
        upstream: tuple[object, ...] = ()
        if position.upstream is not None:
            unit = position.upstream.unit
            upstream = (unit, *(self._bucket(application, unit, v, position.upstream.consumption.value(v))
                                for v in DemandVariable))
        prompt = None if position.input_tokens is None else self._bucket(
            application, position.unit, DemandVariable.INPUT, position.input_tokens)
        return (application, position.unit, upstream, prompt)

    def _bucket(self, application: str, unit: str, variable: DemandVariable, value: int) -> int:
        key = (application, unit, variable)
        if key not in self._bucketing:
            records = self.estimators[application].graph.observations(unit)
            self._bucketing[key] = Bucketing.of([float(r.consumption.value(variable)) for r in records], BUCKETS)
        return self._bucketing[key].index(value)
