"""The ports `forethought up` gives its services: each its own, each a TCP port it can dial."""

from __future__ import annotations

from pathlib import Path

import pytest
from forethought.launcher import UpOptions, port_plan_problem


def test_the_defaults_and_a_moved_block_are_fine():
    assert port_plan_problem(UpOptions()) is None
    assert port_plan_problem(UpOptions(workers=4, base_port=40000, http_port=8080, predictor_model=Path("p"))) is None
    assert port_plan_problem(UpOptions(http_port=50053)) is None  # the predictor's port, with no predictor to start


@pytest.mark.parametrize(("options", "problem"), [
    (UpOptions(base_port=70000), "--base-port 70000 puts tokenizer on port 70001, outside 1..65535"),
    (UpOptions(base_port=65530), "--base-port 65530 puts worker-0 on port 65540, outside 1..65535"),
    (UpOptions(base_port=0), "--base-port 0 puts scheduler on port 0, outside 1..65535"),
    (UpOptions(http_port=0), "--http-port 0: must be in 1..65535"),  # up could not dial a port picked for it
    (UpOptions(http_port=50052), "--http-port 50052 is also tokenizer's port (--base-port 50051): give each its own"),
    (UpOptions(http_port=50062, workers=3), "--http-port 50062 is also worker-1's port (--base-port 50051): give each its own"),
    (UpOptions(http_port=50053, predictor_model=Path("p")),
     "--http-port 50053 is also predictor's port (--base-port 50051): give each its own"),
])
def test_a_port_out_of_range_or_given_twice_is_named_with_its_flag(options, problem):
    assert port_plan_problem(options) == problem
