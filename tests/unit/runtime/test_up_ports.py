"""`forethought up`'s options, checked before anything starts: each service a port of its own that it can dial,
and each service's flags and environment through that service's own rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from forethought.launcher import UpOptions, options_problem, port_plan_problem


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


@pytest.mark.parametrize(("options", "problem"), [
    (UpOptions(router="nearest"), "scheduler: invalid setting --router / FORETHOUGHT_ROUTER = 'nearest': must be one of "
                                  "e2, round_robin, least_load, cache_aware, kv_cost, weighted"),
    (UpOptions(policy="lifo"), "scheduler: invalid setting --policy / FORETHOUGHT_POLICY = 'lifo': must be one of "
                               "fcfs, ssjf, gittins, lstf, rtbe"),
    (UpOptions(sim_speedup=0.0), "worker-0: invalid setting --sim-speedup / FORETHOUGHT_SIM_SPEEDUP = 0.0: must be > 0"),
    (UpOptions(sim_speedup=float("nan")), "worker-0: invalid setting --sim-speedup / FORETHOUGHT_SIM_SPEEDUP = 'nan': must be a number"),
    (UpOptions(http_port=0), "--http-port 0: must be in 1..65535"),  # then the ports
    (UpOptions(engine="sim", workers=2, router="kv_cost", policy="gittins", sim_speedup=5.0), None),
])
def test_a_setting_a_service_would_refuse_is_named_before_anything_starts(options, problem):
    assert options_problem(options) == problem


def test_the_services_rules_are_read_with_the_environment_up_passes_them(monkeypatch):
    monkeypatch.setenv("FORETHOUGHT_MAX_QUEUE", "0")  # a setting only the scheduler reads
    assert options_problem(UpOptions()) == "scheduler: invalid setting --max-queue / FORETHOUGHT_MAX_QUEUE = 0: must be >= 1"
    monkeypatch.setenv("FORETHOUGHT_MAX_QUEUE", "64")
    monkeypatch.setenv("FORETHOUGHT_LOG_LEVEL", "LOUD")  # every service reads it: the first to start is named
    assert options_problem(UpOptions()).startswith("tokenizer: invalid setting --log-level / FORETHOUGHT_LOG_LEVEL = 'LOUD'")
