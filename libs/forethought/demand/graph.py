"""The Probabilistic Demand Graph of one application (Hermes section 3.2, Fig. 5).

An application is a list of functional units. Each unit keeps its backend-spec (an LLM with an
optional LoRA adapter, or a tool), its backend-consumption (the raw values of every recorded execution,
at most ``max_recorded`` per unit, oldest dropped first) and its next-unit relation (the declared
successors, with the branch-taken probability read from observed frequencies).

Loops are part of the model: a code-generation test loop or a ReAct reasoning loop is an edge back to an
earlier unit (or to the unit itself) taken with some probability. What is not allowed is a loop that
never exits: every unit must reach ``end`` along edges of positive probability, so a random walk ends.

::

    write_code --1.0--> run_tests --0.55--> end
                           ^  |
                           |  +--0.45--> fix_code
                           +----1.0--------+
"""

from __future__ import annotations

import enum
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from forethought.demand.consumption import Observation, UnitExecution
from forethought.domain import InvalidField, require

END = "end"
"""The pseudo-unit a run jumps to when it finishes; no unit may take this name."""

MAX_RECORDED = 1000
"""Recorded executions kept per unit (Hermes section 3.2: 1,000 values per variable, FIFO)."""

_PROBABILITY_TOLERANCE = 1e-6


class BackendKind(enum.Enum):
    LLM = "llm"
    TOOL = "tool"


@dataclass(frozen=True)
class BackendSpec:
    """What a unit runs on: a model (with a LoRA adapter or not), or a tool backend of a kind. An llm unit
    may name the ``prompt_prefix`` its every prompt starts with (instructions, few-shot examples): the KV
    prefix a prewarm computes before the unit is called (Hermes 3.4)."""

    kind: BackendKind
    model: str = ""
    lora_adapter: str = ""
    tool: str = ""
    prompt_prefix: str = ""

    def validate(self, field: str) -> None:
        if self.kind is BackendKind.LLM:
            require(bool(self.model), f"{field}.model", "is required for an llm unit")
            require(not self.tool, f"{field}.tool", "is only for a tool unit")
        else:
            require(bool(self.tool), f"{field}.tool", "is required for a tool unit")
            require(not self.model, f"{field}.model", "is only for an llm unit")
            require(not self.lora_adapter, f"{field}.lora_adapter", "is only for an llm unit")
            require(not self.prompt_prefix, f"{field}.prompt_prefix", "is only for an llm unit")


@dataclass(frozen=True)
class FunctionalUnit:
    """A unit: its backend and its declared successors with their prior branch probabilities.

    ``next_units`` maps a unit name (or ``END``) to the probability of jumping there; an empty mapping
    means the unit always ends the run. The prior stands until the unit's first recorded execution.
    """

    name: str
    backend: BackendSpec
    next_units: Mapping[str, float] = field(default_factory=dict)

    @property
    def successors(self) -> tuple[str, ...]:
        """Declared next units, ``END`` left out."""
        return tuple(name for name in self.next_units if name != END)

    def may_end(self) -> bool:
        return not self.next_units or END in self.next_units


class UnitProfile:
    """The recorded executions of one unit and the jumps taken after them, both bounded FIFO."""

    def __init__(self, max_recorded: int) -> None:
        self.observations: deque[Observation] = deque(maxlen=max_recorded)
        self._jumps: deque[str] = deque(maxlen=max_recorded)
        self._jump_counts: Counter[str] = Counter()

    @property
    def jumps(self) -> tuple[str, ...]:
        """The next unit (or ``END``) after each recorded execution, oldest first."""
        return tuple(self._jumps)

    def entries(self) -> list[tuple[Observation, str]]:
        """Each recorded execution with the jump taken after it, oldest first."""
        return list(zip(self.observations, self._jumps))

    def add(self, observation: Observation, jump: str) -> None:
        if len(self._jumps) == self._jumps.maxlen:
            self._jump_counts[self._jumps[0]] -= 1
        self.observations.append(observation)
        self._jumps.append(jump)
        self._jump_counts[jump] += 1

    def jump_frequencies(self) -> dict[str, float]:
        total = len(self._jumps)
        return {name: count / total for name, count in self._jump_counts.items() if count > 0}


class PDGraph:
    """A validated demand graph and its profiles; ``record`` learns from every finished run.

    Raises:
        InvalidField: the graph is empty, a name is reused or reserved, a successor is unknown, branch
            probabilities are out of range or do not sum to 1, or a loop never reaches ``end``.
    """

    def __init__(
        self,
        name: str,
        units: Sequence[FunctionalUnit],
        entry: str | None = None,
        max_recorded: int = MAX_RECORDED,
    ) -> None:
        require(bool(name), "name", "must be a non-empty string")
        require(len(units) > 0, "units", "must hold at least one unit")
        require(max_recorded >= 1, "max_recorded", "must be >= 1")
        self.name = name
        self.units: dict[str, FunctionalUnit] = {}
        for unit in units:
            require(unit.name != END, f"units.{unit.name}", f"'{END}' is reserved for the end of a run")
            require(unit.name not in self.units, f"units.{unit.name}", "is defined twice")
            self.units[unit.name] = unit
        self.entry = entry if entry is not None else units[0].name
        require(self.entry in self.units, "entry", f"unknown unit '{self.entry}'")
        for unit in units:
            self._validate_unit(unit)
        self._require_every_loop_exits()
        self.max_recorded = max_recorded
        self.profiles = {unit.name: UnitProfile(max_recorded) for unit in units}
        self.version = 0
        """Counts recorded runs; caches built from the profiles compare it to know they are stale."""

    def unit(self, name: str, field: str = "unit") -> FunctionalUnit:
        if name not in self.units:
            raise InvalidField(field, f"unknown unit '{name}' in application '{self.name}'")
        return self.units[name]

    def observations(self, name: str) -> Sequence[Observation]:
        return self.profiles[self.unit(name).name].observations

    def branch_probabilities(self, name: str) -> dict[str, float]:
        """Next unit (or ``END``) -> probability: observed frequencies, the declared prior before any."""
        unit = self.unit(name)
        observed = self.profiles[name].jump_frequencies()
        if observed:
            return observed
        return dict(unit.next_units) if unit.next_units else {END: 1.0}

    def record(self, run: Sequence[UnitExecution]) -> None:
        """Adds a finished run, first unit to last, to the profiles of the units it visited.

        The whole run is checked before anything is added, so a rejected run changes nothing.

        Raises:
            InvalidField: the run is empty, does not start at the entry, visits an unknown unit, jumps
                along an edge the graph does not declare, ends where the graph cannot end, or holds a
                negative length or duration.
        """
        self._validate_run(run)
        for index, step in enumerate(run):
            upstream = run[index - 1] if index > 0 else None
            jump = run[index + 1].unit if index + 1 < len(run) else END
            self.profiles[step.unit].add(Observation(step.consumption, upstream), jump)
        self.version += 1

    def _validate_unit(self, unit: FunctionalUnit) -> None:
        field = f"units.{unit.name}"
        require(bool(unit.name), "units", "every unit needs a non-empty name")
        unit.backend.validate(f"{field}.backend")
        for target, probability in unit.next_units.items():
            require(target == END or target in self.units, f"{field}.next.{target}", "unknown unit")
            require(0 < probability <= 1, f"{field}.next.{target}", "must be a probability in (0, 1]")
        if unit.next_units:
            total = sum(unit.next_units.values())
            require(abs(total - 1) <= _PROBABILITY_TOLERANCE, f"{field}.next", f"probabilities sum to {total:g}, not 1")

    def _require_every_loop_exits(self) -> None:
        reaches_end = {name for name, unit in self.units.items() if unit.may_end()}
        grew = True
        while grew:
            before = len(reaches_end)
            reaches_end |= {n for n, u in self.units.items() if any(s in reaches_end for s in u.successors)}
            grew = len(reaches_end) > before
        trapped = sorted(set(self.units) - reaches_end)
        if trapped:
            raise InvalidField(
                f"units.{trapped[0]}.next",
                f"never reaches '{END}': a run entering it loops forever among {', '.join(trapped)}",
            )

    def _validate_run(self, run: Sequence[UnitExecution]) -> None:
        require(len(run) > 0, "run", "must hold at least one step")
        require(run[0].unit == self.entry, "run[0].unit", f"must be the entry unit '{self.entry}'")
        for index, step in enumerate(run):
            self.unit(step.unit, f"run[{index}].unit")
            step.consumption.validate(f"run[{index}]")
        for index, (step, following) in enumerate(zip(run, run[1:])):
            require(
                following.unit in self.units[step.unit].next_units,
                f"run[{index + 1}].unit",
                f"'{following.unit}' does not follow '{step.unit}' in the graph",
            )
        require(self.units[run[-1].unit].may_end(), f"run[{len(run) - 1}].unit", f"'{run[-1].unit}' cannot end a run")
