"""The load-time table: measured entries first, else start-up + per-rank set-up + weights over the read rate."""

from __future__ import annotations

import pytest
from forethought.planner import ExecutionPlan, LoadTimeModel

from .conftest import make_model


def test_the_formula_and_a_measured_entry() -> None:
    model = make_model("m")
    times = LoadTimeModel(table={("m", ExecutionPlan(1, 2)): 30.0})
    assert times.load_time(model, ExecutionPlan(1, 1)) == pytest.approx(8.0 + 13.48e9 / 2e9)
    assert times.load_time(model, ExecutionPlan(3, 4)) == pytest.approx(8.0 + 9.0 + 13.48e9 / 8e9)
    assert times.load_time(model, ExecutionPlan(1, 2)) == 30.0


@pytest.mark.parametrize(("size", "tps"), [("7b", (1, 2, 4, 8)), ("13b", (1, 2, 4, 8)), ("70b", (4, 8))])
def test_the_defaults_stay_in_the_papers_reported_range(size: str, tps: tuple[int, ...]) -> None:
    model = make_model(size, size)
    for tp in tps:
        assert 11.0 <= LoadTimeModel().load_time(model, ExecutionPlan(1, tp)) <= 47.0


def test_negative_times_are_refused() -> None:
    with pytest.raises(ValueError):
        LoadTimeModel(startup_s=-1)
