"""Online refinement of unit demand from the unit that ran before it (Hermes section 3.2).

Each demand variable's range is cut into 10 equal buckets and the Pearson coefficient is taken between
bucket indices of joined records (one record of a unit and the record of the unit that led to it in the
same run). The paper's five correlations are checked, the five-tuple mask
``(M_I^Ĩ, M_I^Õ, M_O^Õ, M_O^I, M_P^P̃)``: the unit's input against the upstream input and output, its
output against the upstream output and its own input, its parallelism against the upstream parallelism.
Those above the threshold (0.5) are used: given the observed upstream buckets, only the records in the
same buckets are sampled, P(I | Ĩ = i, Õ = o) read off the filtered records. When no record matches, the
refinement steps back to the unfiltered records rather than guess.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from forethought.demand.consumption import Consumption, DemandVariable, Observation

BUCKETS = 10
"""Buckets a demand range is cut into (Hermes section 5.1)."""

CORRELATION_THRESHOLD = 0.5
"""A correlation is used when its Pearson coefficient is above this (Hermes section 5.1)."""

INPUT, OUTPUT, PARALLELISM = DemandVariable.INPUT, DemandVariable.OUTPUT, DemandVariable.PARALLELISM


@dataclass(frozen=True)
class Bucketing:
    """``count`` equal-width buckets over ``[low, high]``; values outside fall in the end buckets."""

    low: float
    high: float
    count: int = BUCKETS

    @classmethod
    def of(cls, values: Sequence[float], count: int = BUCKETS) -> Bucketing:
        return cls(min(values), max(values), count) if values else cls(0.0, 0.0, count)

    @property
    def width(self) -> float:
        return (self.high - self.low) / self.count

    def index(self, value: float) -> int:
        if self.high <= self.low:
            return 0
        return min(self.count - 1, max(0, math.floor((value - self.low) / self.width)))


def bucketed_pearson(xs: Sequence[float], ys: Sequence[float], buckets: int = BUCKETS) -> float:
    """Pearson coefficient of the bucket indices of paired values; 0 when either side never varies."""
    if len(xs) != len(ys):
        raise ValueError("xs and ys must pair up")
    x_bucketing, y_bucketing = Bucketing.of(xs, buckets), Bucketing.of(ys, buckets)
    bx = [x_bucketing.index(x) for x in xs]
    by = [y_bucketing.index(y) for y in ys]
    if len(bx) < 2:
        return 0.0
    mean_x, mean_y = sum(bx) / len(bx), sum(by) / len(by)
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in zip(bx, by))
    spread_x = math.sqrt(sum((x - mean_x) ** 2 for x in bx))
    spread_y = math.sqrt(sum((y - mean_y) ** 2 for y in by))
    if spread_x == 0 or spread_y == 0:
        return 0.0
    return covariance / (spread_x * spread_y)


@dataclass(frozen=True)
class Correlation:
    """One entry of the paper's mask: whether ``source`` (the upstream unit's, or the unit's own) drives
    ``target``, with the coefficient it was judged on."""

    target: DemandVariable
    source: DemandVariable
    from_upstream: bool
    coefficient: float


CANDIDATES: tuple[tuple[DemandVariable, DemandVariable, bool], ...] = (
    (INPUT, INPUT, True),  # M_I^Ĩ
    (INPUT, OUTPUT, True),  # M_I^Õ
    (OUTPUT, OUTPUT, True),  # M_O^Õ
    (OUTPUT, INPUT, False),  # M_O^I
    (PARALLELISM, PARALLELISM, True),  # M_P^P̃
)


def correlations(
    records: Sequence[Observation], upstream_unit: str | None, buckets: int = BUCKETS
) -> list[Correlation]:
    """The five coefficients for the records of one unit; upstream ones over the records that followed
    ``upstream_unit`` in their run (none when it is None), the own one over every record."""
    joined = [(r.upstream.consumption, r.consumption) for r in records if r.upstream and r.upstream.unit == upstream_unit]
    found = []
    for target, source, from_upstream in CANDIDATES:
        if from_upstream:
            pairs = [(up.value(source), own.value(target)) for up, own in joined]
        else:
            pairs = [(r.consumption.value(source), r.consumption.value(target)) for r in records]
        xs, ys = [float(x) for x, _ in pairs], [float(y) for _, y in pairs]
        found.append(Correlation(target, source, from_upstream, bucketed_pearson(xs, ys, buckets)))
    return found


class RecordFilter:
    """Which of a unit's records to sample from, given the unit that ran before it and what it consumed.

    Built once per (unit, upstream unit) from a snapshot of the unit's records; ``candidates`` answers in
    one dictionary lookup, which keeps Monte Carlo walks cheap.
    """

    def __init__(
        self,
        records: Sequence[Observation],
        upstream_unit: str | None,
        buckets: int = BUCKETS,
        threshold: float = CORRELATION_THRESHOLD,
    ) -> None:
        self.correlations = correlations(records, upstream_unit, buckets)
        used = [c for c in self.correlations if c.coefficient > threshold]
        self.upstream_sources = sorted({c.source for c in used if c.from_upstream}, key=lambda v: v.value)
        self.uses_own_input = any(not c.from_upstream for c in used)
        self.all_indices = list(range(len(records)))
        followers = [(i, r.upstream.consumption) for i, r in enumerate(records) if r.upstream and r.upstream.unit == upstream_unit]
        self.upstream_bucketing = {
            source: Bucketing.of([float(upstream.value(source)) for _, upstream in followers], buckets)
            for source in self.upstream_sources
        }
        self._by_upstream_bucket: dict[tuple[int, ...], list[int]] = defaultdict(list)
        if self.upstream_sources:
            for i, upstream in followers:
                self._by_upstream_bucket[self._key(upstream)].append(i)
        self._input_bucketing = Bucketing.of([float(r.consumption.input_tokens) for r in records], buckets)
        self._input_buckets = [self._input_bucketing.index(r.consumption.input_tokens) for r in records]

    @property
    def refines(self) -> bool:
        return bool(self.upstream_sources) or self.uses_own_input

    def candidates(self, upstream: Consumption | None, input_tokens: int | None = None) -> list[int]:
        """Indices of the records to sample from; all of them when nothing correlates or nothing matches."""
        chosen = self.all_indices
        if upstream is not None and self.upstream_sources:
            chosen = self._by_upstream_bucket.get(self._key(upstream)) or chosen
        if input_tokens is not None and self.uses_own_input:
            bucket = self._input_bucketing.index(input_tokens)
            chosen = [i for i in chosen if self._input_buckets[i] == bucket] or chosen
        return chosen

    def _key(self, upstream: Consumption) -> tuple[int, ...]:
        return tuple(self.upstream_bucketing[s].index(upstream.value(s)) for s in self.upstream_sources)

