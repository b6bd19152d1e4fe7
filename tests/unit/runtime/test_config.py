"""Settings from flags, environment and defaults, validated with messages naming the setting."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest
from forethought.config import (
    ConfigError,
    ServiceSettings,
    add_arguments,
    option,
    settings_from,
)


@dataclass(frozen=True)
class DemoSettings(ServiceSettings):
    workers: int = option(2, "how many")
    verbose: bool = option(False, "say more")


def parse(argv: list[str], environ: dict[str, str]) -> DemoSettings:
    parser = argparse.ArgumentParser()
    add_arguments(parser, DemoSettings)
    return settings_from(DemoSettings, parser.parse_args(argv), environ)


@pytest.mark.parametrize(
    ("argv", "environ", "expected_port", "expected_workers"),
    [
        ([], {}, 0, 2),
        ([], {"FORETHOUGHT_PORT": "7000", "FORETHOUGHT_WORKERS": "5"}, 7000, 5),
        (["--port", "8000"], {"FORETHOUGHT_PORT": "7000"}, 8000, 2),
    ],
    ids=["defaults", "environment", "flag-beats-environment"],
)
def test_flag_beats_environment_beats_default(argv, environ, expected_port, expected_workers):
    settings = parse(argv, environ)
    assert (settings.port, settings.workers) == (expected_port, expected_workers)


def test_booleans_parse_from_flags_and_environment():
    assert parse(["--verbose"], {}).verbose is True
    assert parse([], {"FORETHOUGHT_VERBOSE": "yes"}).verbose is True
    assert parse(["--no-verbose"], {"FORETHOUGHT_VERBOSE": "1"}).verbose is False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--port", "70000"], "--port / FORETHOUGHT_PORT = 70000: must be in 0..65535"),
        (["--port", "abc"], "--port / FORETHOUGHT_PORT = 'abc': must be an integer"),
        (["--otel-exporter", "zipkin"], "--otel-exporter / FORETHOUGHT_OTEL_EXPORTER = 'zipkin': must be one of"),
        (["--otel-exporter", "otlp"], "--otel-endpoint / FORETHOUGHT_OTEL_ENDPOINT = '': is required when otel_exporter is otlp"),
        (["--redis-url", "localhost:6379"], "--redis-url / FORETHOUGHT_REDIS_URL = 'localhost:6379': must start with"),
        (["--redis-url", "redis://127.0.0.1:6379/0?socket_timeout=abc"],
         "--redis-url / FORETHOUGHT_REDIS_URL = 'redis://127.0.0.1:6379/0?socket_timeout=abc': must be a URL redis-py "
         "reads: Invalid value for 'socket_timeout' in connection URL."),
        (["--grace-s", "-1"], "--grace-s / FORETHOUGHT_GRACE_S = -1.0: must be >= 0"),
        (["--grace-s", "nan"], "--grace-s / FORETHOUGHT_GRACE_S = 'nan': must be a number"),
        (["--log-level", "LOUD"], "--log-level / FORETHOUGHT_LOG_LEVEL = 'LOUD': must be one of DEBUG, INFO, "),
    ],
    ids=["port-range", "port-type", "exporter", "otlp-endpoint", "redis-url", "redis-url-option", "grace", "grace-nan",
         "log-level"],
)
def test_bad_values_name_the_setting_and_the_rule(argv, message):
    with pytest.raises(ConfigError) as raised:
        parse(argv, {})
    assert message in str(raised.value)


def test_the_scheduler_refuses_a_prefix_index_timeout_that_is_not_positive():
    from forethought.services.scheduler.shell import Settings

    with pytest.raises(ConfigError) as raised:
        Settings(index_timeout_s=0).validate()
    assert "--index-timeout-s / FORETHOUGHT_INDEX_TIMEOUT_S = 0: must be > 0" in str(raised.value)


def test_the_worker_refuses_a_vllm_dtype_it_does_not_know():
    from forethought.services.worker.shell import Settings

    with pytest.raises(ConfigError) as raised:
        Settings(vllm_dtype="int4").validate()
    assert "--vllm-dtype / FORETHOUGHT_VLLM_DTYPE = 'int4': must be one of" in str(raised.value)


def test_the_worker_refuses_a_negative_sim_load_time():
    from forethought.services.worker.shell import Settings

    with pytest.raises(ConfigError) as raised:
        Settings(sim_load_s=-1.0).validate()
    assert "--sim-load-s / FORETHOUGHT_SIM_LOAD_S = -1.0: must be >= 0" in str(raised.value)
