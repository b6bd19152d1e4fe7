"""Monte Carlo estimate of an application's remaining demand (Hermes section 3.2).

From the unit an application is in, a random walk samples the next unit from the branch probabilities
and each unit's consumption from its recorded executions (one whole record, so a unit's input, output
and parallelism stay jointly as observed), until the walk reaches ``end``. LLM consumption turns into
seconds through a function the caller passes (the shell passes the cost model; ``PerTokenSeconds`` is the
paper's average per-token processing time); a tool unit costs its recorded duration. With refinement
on, each unit's records are first narrowed to those whose upstream record fell in the same buckets as
the upstream consumption at hand: the observed one for the unit after a finished unit, the sampled one
further down the walk.

The samples are of the demand from the start of the current unit, so the attained service that Eq. 1
and Eq. 2 take is the service the current unit has received.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import accumulate

from forethought.demand.consumption import Consumption, Observation, UnitExecution
from forethought.demand.distribution import DiscreteDemand, discretize
from forethought.demand.graph import END, BackendKind, BackendSpec, PDGraph
from forethought.demand.refinement import BUCKETS, CORRELATION_THRESHOLD, RecordFilter
from forethought.domain import InvalidField, require

LlmSeconds = Callable[[BackendSpec, Consumption], float]
"""Seconds an LLM unit's execution takes on its backend: all its parallel requests, prefill and decode."""

WALKS = 1000
MAX_WALK_UNITS = 10_000
"""A walk stops after this many units: a guard, reached only by loops that almost never exit."""


@dataclass(frozen=True)
class PerTokenSeconds:
    """The paper's conversion: lengths times the average per-token processing time, per request."""

    prefill_s: float
    decode_s: float

    def __call__(self, backend: BackendSpec, consumption: Consumption) -> float:
        per_request = consumption.input_tokens * self.prefill_s + consumption.output_tokens * self.decode_s
        return consumption.parallelism * per_request


@dataclass(frozen=True)
class RunPosition:
    """Where a running application stands: the unit it is in, the finished unit that led there (as
    observed; None at the entry), the current unit's prompt length per request when known, and its
    output length per request when a forecast exists (the length predictor's, for an LLM unit whose
    prompt is known: Hermes 3.2 uses such a model where one is available)."""

    unit: str
    upstream: UnitExecution | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True)
class DemandEstimate:
    """Paired samples, one per walk: the current unit's demand and the demand of it and all after it.

    The discretized forms are computed once, on first use, so re-ranking an application every bucket
    period as its attained service grows costs a sweep over at most ``buckets`` points.
    """

    current_s: tuple[float, ...]
    total_s: tuple[float, ...]
    buckets: int = BUCKETS

    @property
    def mean_s(self) -> float:
        return sum(self.total_s) / len(self.total_s)

    @property
    def worst_s(self) -> float:
        return max(self.total_s)

    @cached_property
    def downstream_s(self) -> tuple[float, ...]:
        """Per walk, the demand of the units after the current one."""
        return tuple(total - current for total, current in zip(self.total_s, self.current_s))

    @cached_property
    def total(self) -> DiscreteDemand:
        return discretize(self.total_s, self.buckets)

    @cached_property
    def downstream(self) -> DiscreteDemand:
        return discretize(self.downstream_s, self.buckets)

    def remaining_after(self, attained_s: float) -> list[float]:
        """Samples of the demand still to come once the current unit has had ``attained_s`` of service.

        Conditioned on the unit still running (walks whose total exceeds it). When the unit has outrun
        every walk, its own rest is taken as zero and the units after it remain.
        """
        require(attained_s >= 0, "attained_s", "must be >= 0")
        beyond = [total - attained_s for total in self.total_s if total > attained_s]
        return beyond if beyond else list(self.downstream_s)


class DemandEstimator:
    """Samples remaining demand over one graph; per-unit tables are rebuilt when the graph learns.

    Args:
        graph: the application's PDGraph.
        llm_seconds: seconds of one LLM unit execution (the shell passes the cost model).
        walks: random walks per estimate.
        refine: narrow records by the upstream consumption (online refinement).
        buckets, correlation_threshold: the refinement's bucket count and Pearson threshold.
    """

    def __init__(
        self,
        graph: PDGraph,
        llm_seconds: LlmSeconds,
        walks: int = WALKS,
        refine: bool = True,
        buckets: int = BUCKETS,
        correlation_threshold: float = CORRELATION_THRESHOLD,
        max_walk_units: int = MAX_WALK_UNITS,
    ) -> None:
        require(walks >= 1, "walks", "must be >= 1")
        require(buckets >= 1, "buckets", "must be >= 1")
        self.graph = graph
        self.llm_seconds = llm_seconds
        self.walks = walks
        self.refine = refine
        self.buckets = buckets
        self.correlation_threshold = correlation_threshold
        self.max_walk_units = max_walk_units
        self._version = -1
        self._records: dict[str, Sequence[Observation]] = {}
        self._seconds: dict[str, list[float]] = {}
        self._branches: dict[str, tuple[list[str], list[float]]] = {}  # targets, cumulative weights
        self._every_record: dict[str, list[int]] = {}
        self._filters: dict[tuple[str, str | None], RecordFilter] = {}

    def estimate(self, position: RunPosition, rng: random.Random) -> DemandEstimate:
        """``walks`` samples of the demand from the start of ``position.unit`` to the end of the run.

        Raises:
            InvalidField: the position names an unknown unit or a negative length, or a unit a walk
                reaches has no recorded execution.
        """
        self._refresh()
        self._validate(position)
        current, total = [], []
        for _ in range(self.walks):
            first_s, walk_s = self._walk(position, rng)
            current.append(first_s)
            total.append(walk_s)
        return DemandEstimate(tuple(current), tuple(total), self.buckets)

    def unit_seconds(self, position: RunPosition) -> list[float]:
        """Seconds of each record the current unit is sampled from (refined as in ``estimate``), sorted."""
        self._refresh()
        self._validate(position)
        indices = self._candidates(position.unit, position.upstream, position.input_tokens)
        seconds = self._unit_seconds(position.unit)
        return sorted(seconds[i] for i in indices)

    def _validate(self, position: RunPosition) -> None:
        self.graph.unit(position.unit, "position.unit")
        if position.upstream is not None:
            self.graph.unit(position.upstream.unit, "position.upstream.unit")
            position.upstream.consumption.validate("position.upstream")
        require(position.input_tokens is None or position.input_tokens >= 0, "position.input_tokens", "must be >= 0")
        require(position.output_tokens is None or position.output_tokens >= 0, "position.output_tokens", "must be >= 0")

    def _walk(self, position: RunPosition, rng: random.Random) -> tuple[float, float]:
        unit, upstream, input_tokens = position.unit, position.upstream, position.input_tokens
        first_s = walk_s = 0.0
        for step in range(self.max_walk_units):
            index = rng.choice(self._candidates(unit, upstream, input_tokens))
            seconds = self._unit_seconds(unit)[index]
            consumption = self._records[unit][index].consumption
            if step == 0:
                if position.output_tokens is not None and self.graph.units[unit].backend.kind is BackendKind.LLM:
                    # The record keeps the step's shape (parallelism, prompt); the forecast replaces its output.
                    consumption = replace(consumption, output_tokens=position.output_tokens)
                    seconds = self.llm_seconds(self.graph.units[unit].backend, consumption)
                first_s = seconds
            walk_s += seconds
            targets, cumulative = self._branches[unit]
            following = rng.choices(targets, cum_weights=cumulative)[0]
            if following == END:
                break
            upstream = UnitExecution(unit, consumption)
            unit, input_tokens = following, None
        return first_s, walk_s

    def _candidates(self, unit: str, upstream: UnitExecution | None, input_tokens: int | None) -> list[int]:
        records = self._records[unit]
        if not records:
            raise InvalidField(f"units.{unit}", "has no recorded execution to sample demand from")
        if not self.refine:
            return self._every_record[unit]
        upstream_unit = upstream.unit if upstream is not None else None
        key = (unit, upstream_unit)
        if key not in self._filters:
            self._filters[key] = RecordFilter(records, upstream_unit, self.buckets, self.correlation_threshold)
        return self._filters[key].candidates(upstream.consumption if upstream else None, input_tokens)

    def _unit_seconds(self, unit: str) -> list[float]:
        if unit not in self._seconds:
            backend = self.graph.units[unit].backend
            self._seconds[unit] = [self._seconds_of(backend, record.consumption) for record in self._records[unit]]
        return self._seconds[unit]

    def _seconds_of(self, backend: BackendSpec, consumption: Consumption) -> float:
        if backend.kind is BackendKind.TOOL:
            return consumption.tool_duration_s
        return self.llm_seconds(backend, consumption)

    def _refresh(self) -> None:
        """Snapshots the records and branch probabilities when the graph recorded a run since."""
        if self._version == self.graph.version:
            return
        self._version = self.graph.version
        self._records = {name: tuple(self.graph.observations(name)) for name in self.graph.units}
        self._branches = {}
        for name in self.graph.units:
            probabilities = self.graph.branch_probabilities(name)
            self._branches[name] = (list(probabilities), list(accumulate(probabilities.values())))
        self._every_record = {name: list(range(len(records))) for name, records in self._records.items()}
        self._seconds.clear()
        self._filters.clear()
