"""Applications described in a YAML or JSON file, loaded into a PDGraph with initial profiles
(Hermes section 3.2 profiles each application offline; section 4 keeps the result as a JSON file).

A file gives the units, their backends, the branch probabilities, and each unit's length
distributions. Loading runs ``profiling_runs`` synthetic runs, walking the graph from its entry with
the given probabilities and drawing each unit's consumption, and records them, exactly as real runs are
recorded later. So the loaded graph holds raw records, the form the paper keeps, and the correlations a
file declares (``follows``) show up in the records where the refinement can find them::

    name: code_generation
    profiling_runs: 200
    units:
      write_code:
        backend: {kind: llm, model: llama-2-7b}
        next: {run_tests: 1.0}
        profile:
          input_tokens: {lognormal: {median: 600, sigma: 0.35}}
          output_tokens: {follows: input_tokens, scale: 0.6, sigma: 0.2, min: 40}
      run_tests:
        backend: {kind: tool, tool: container}
        next: {end: 0.55, write_code: 0.45}
        profile:
          tool_duration_s: {uniform: [1.5, 4.0]}

A variable is a number (always that value), a list (raw values, drawn uniformly), or a mapping with one
of ``lognormal: {median, sigma}``, ``normal: {mean, std}``, ``uniform: [low, high]``, or ``follows``
(``upstream.<variable>`` of the unit that ran before, or one of the unit's own variables drawn earlier
in the order parallelism, input_tokens, output_tokens, tool_duration_s) as ``offset + scale * value``
times lognormal noise of ``sigma``; any of them may add ``min`` and ``max``. Keys ``description`` and
``sources`` are free text for the reader.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from forethought.demand.consumption import Consumption, UnitExecution
from forethought.demand.graph import END, FunctionalUnit, PDGraph
from forethought.demand.schema import integer, mapping, no_unknown_keys, number, sequence, text
from forethought.demand.serialization import backend_from_dict, graph_of, next_units_from_dict
from forethought.documents import read_document
from forethought.domain import InvalidField, require

PROFILING_RUNS = 200
"""Synthetic runs recorded when a file does not say (the paper profiles 100 to 1,000 runs)."""

APPLICATION_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
"""An application's name: also a metric label and a Redis key part, so short and plain."""


def require_application_name(name: str, field: str) -> None:
    """Raises InvalidField naming ``field`` unless ``name`` is an application's name."""
    require(APPLICATION_NAME.fullmatch(name) is not None, field, f"must match {APPLICATION_NAME.pattern}")


MAX_PROFILING_RUNS = 10_000
"""Synthetic runs a file may ask for (the paper profiles 100 to 1,000); more would stall whoever loads it: the
demand service registering it, or ``forethought app run`` checking it before it is sent."""
MAX_PROFILING_RUN_UNITS = 100_000

VARIABLES = ("parallelism", "input_tokens", "output_tokens", "tool_duration_s")
"""Drawn in this order, so ``follows`` may name a variable drawn before it."""

Draw = Callable[[random.Random, Mapping[str, float], UnitExecution | None], float]


def load_application(path: str | Path, rng: random.Random | None = None) -> PDGraph:
    """Reads ``path`` (``.yaml``, ``.yml`` or ``.json``) into a graph with its initial profiles.

    Args:
        rng: draws the profiling runs; by default ``random.Random(seed)`` with the file's ``seed`` (0).

    Raises:
        InvalidField: the file breaks a rule; the field names where.
    """
    return application_from_dict(read_document(path), rng)


def application_from_dict(data: object, rng: random.Random | None = None) -> PDGraph:
    """The graph an application file's parsed content describes, with its profiling runs recorded."""
    runs = integer(mapping(data, "application").get("profiling_runs", PROFILING_RUNS), "profiling_runs")
    require(0 <= runs <= MAX_PROFILING_RUNS, "profiling_runs", f"must be in 0..{MAX_PROFILING_RUNS}")  # before any work
    graph, draws, root = _parse(data)
    rng = rng if rng is not None else random.Random(integer(root.get("seed", 0), "seed"))
    for _ in range(runs):
        graph.record(_profiling_run(graph, draws, rng))
    return graph


def draw_runs(data: object, count: int, rng: random.Random) -> list[list[UnitExecution]]:
    """``count`` runs drawn as the file describes them (what profiling records): the steps a live or
    simulated run of the application takes, with what each consumes."""
    graph, draws, _ = _parse(data)
    return [_profiling_run(graph, draws, rng) for _ in range(count)]


def _parse(data: object) -> tuple[PDGraph, dict[str, dict[str, Draw]], Mapping[str, Any]]:
    root = mapping(data, "application")
    no_unknown_keys(
        root, {"name", "description", "sources", "entry", "profiling_runs", "seed", "max_recorded", "units"}, "application"
    )
    units_data = mapping(root.get("units"), "units")
    require(len(units_data) > 0, "units", "must hold at least one unit")
    units, draws = [], {}
    for name, unit_value in units_data.items():
        field = f"units.{name}"
        unit_data = mapping(unit_value, field)
        no_unknown_keys(unit_data, {"backend", "next", "profile"}, field)
        units.append(
            FunctionalUnit(
                name=name,
                backend=backend_from_dict(unit_data.get("backend"), f"{field}.backend"),
                next_units=next_units_from_dict(unit_data.get("next", {}), f"{field}.next"),
            )
        )
        draws[name] = _profile(unit_data.get("profile", {}), f"{field}.profile")
    graph = graph_of(root, units)
    _require_entry_has_no_upstream(units_data, graph.entry)
    return graph, draws, root


def _profiling_run(graph: PDGraph, draws: Mapping[str, dict[str, Draw]], rng: random.Random) -> list[UnitExecution]:
    run: list[UnitExecution] = []
    unit = graph.entry
    while unit != END:
        require(len(run) < MAX_PROFILING_RUN_UNITS, "units", "a profiling run never ended: some loop almost never exits")
        upstream = run[-1] if run else None
        drawn: dict[str, float] = {}
        for variable in VARIABLES:
            drawn[variable] = draws[unit][variable](rng, drawn, upstream)
        consumption = Consumption(
            input_tokens=round(drawn["input_tokens"]),
            output_tokens=round(drawn["output_tokens"]),
            parallelism=max(1, round(drawn["parallelism"])),
            tool_duration_s=drawn["tool_duration_s"],
        )
        run.append(UnitExecution(unit, consumption))
        probabilities = graph.units[unit].next_units or {END: 1.0}
        unit = rng.choices(list(probabilities), list(probabilities.values()))[0]
    return run


def _profile(value: object, field: str) -> dict[str, Draw]:
    data = mapping(value, field)
    no_unknown_keys(data, set(VARIABLES), field)
    defaults = {"parallelism": 1.0, "input_tokens": 0.0, "output_tokens": 0.0, "tool_duration_s": 0.0}
    return {
        variable: _draw(data.get(variable, defaults[variable]), f"{field}.{variable}", VARIABLES[:position])
        for position, variable in enumerate(VARIABLES)
    }


def _draw(spec: object, field: str, drawn_before: tuple[str, ...]) -> Draw:
    """A function drawing one variable's value from its spec (see the module docstring)."""
    if isinstance(spec, int | float) and not isinstance(spec, bool):
        constant = number(spec, field)
        require(constant >= 0, field, "must be >= 0")
        return lambda rng, drawn, upstream: constant
    if isinstance(spec, list):
        values = [number(v, f"{field}[{i}]") for i, v in enumerate(sequence(spec, field))]
        require(len(values) > 0 and min(values) >= 0, field, "must list at least one value, none negative")
        return lambda rng, drawn, upstream: rng.choice(values)
    data = mapping(spec, field)
    shapes = sorted({"lognormal", "normal", "uniform", "follows"} & set(data))
    require(len(shapes) == 1, field, "needs exactly one of lognormal, normal, uniform, follows")
    shape = shapes[0]
    extra = {"follows": {"scale", "offset", "sigma"}}.get(shape, set())
    no_unknown_keys(data, {shape, "min", "max"} | extra, field)
    low = number(data.get("min", 0.0), f"{field}.min")
    high = number(data.get("max", math.inf), f"{field}.max")
    require(0 <= low <= high, f"{field}.min", "must be >= 0 and <= max")
    sample = _shape_sampler(shape, data, field, drawn_before)
    return lambda rng, drawn, upstream: min(high, max(low, sample(rng, drawn, upstream)))


def _shape_sampler(shape: str, data: Mapping[str, Any], field: str, drawn_before: tuple[str, ...]) -> Draw:
    if shape == "lognormal":
        params = mapping(data[shape], f"{field}.lognormal")
        median = number(params.get("median"), f"{field}.lognormal.median")
        sigma = number(params.get("sigma"), f"{field}.lognormal.sigma")
        require(median > 0 and sigma >= 0, f"{field}.lognormal", "needs median > 0 and sigma >= 0")
        return lambda rng, drawn, upstream: median * math.exp(rng.gauss(0.0, sigma))
    if shape == "normal":
        params = mapping(data[shape], f"{field}.normal")
        mean = number(params.get("mean"), f"{field}.normal.mean")
        std = number(params.get("std"), f"{field}.normal.std")
        require(std >= 0, f"{field}.normal.std", "must be >= 0")
        return lambda rng, drawn, upstream: rng.gauss(mean, std)
    if shape == "uniform":
        bounds = [number(v, f"{field}.uniform") for v in sequence(data[shape], f"{field}.uniform")]
        require(len(bounds) == 2 and 0 <= bounds[0] <= bounds[1], f"{field}.uniform", "must be [low, high], 0 <= low <= high")
        return lambda rng, drawn, upstream: rng.uniform(bounds[0], bounds[1])
    return _follows(data, field, drawn_before)


def _follows(data: Mapping[str, Any], field: str, drawn_before: tuple[str, ...]) -> Draw:
    source = text(data["follows"], f"{field}.follows")
    scale = number(data.get("scale", 1.0), f"{field}.scale")
    offset = number(data.get("offset", 0.0), f"{field}.offset")
    sigma = number(data.get("sigma", 0.0), f"{field}.sigma")
    require(sigma >= 0, f"{field}.sigma", "must be >= 0")
    variable = source.removeprefix("upstream.")
    from_upstream = source != variable
    if from_upstream:
        require(variable in VARIABLES, f"{field}.follows", f"unknown variable '{variable}'")
    else:
        require(source in drawn_before, f"{field}.follows", f"must be upstream.<variable> or one of {list(drawn_before)}")

    def follow(rng: random.Random, drawn: Mapping[str, float], upstream: UnitExecution | None) -> float:
        if from_upstream:
            # NOTE: only the entry runs without an upstream unit, and _require_entry_has_no_upstream holds
            value = float(getattr(upstream.consumption, variable)) if upstream is not None else 0.0
        else:
            value = drawn[variable]
        return (offset + scale * value) * math.exp(rng.gauss(0.0, sigma))

    return follow


def _require_entry_has_no_upstream(units_data: Mapping[str, object], entry: str) -> None:
    """The entry unit starts every run, so no unit ran before it whose variable it could follow."""
    profile = mapping(units_data[entry], f"units.{entry}").get("profile", {})
    for variable, spec in mapping(profile, f"units.{entry}.profile").items():
        if isinstance(spec, Mapping) and str(spec.get("follows", "")).startswith("upstream."):
            raise InvalidField(f"units.{entry}.profile.{variable}.follows", "the entry unit has no unit before it in a run")
