"""The docker-compose cluster, checked without a Docker engine: the file validates, every Forethought
container's command is one the CLI accepts with the environment compose gives it, health checks probe the
ports the services listen on, and Prometheus, the collector and Grafana point where the services are."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Any

import pytest
import yaml
from forethought.config import ServiceSettings

from tests.unit.deploy.conftest import COMPOSE_DIR, REPO, ParseCommand, as_mapping

COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
COMPOSE: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
FORETHOUGHT = sorted(name for name, service in SERVICES.items() if str(service.get("image", "")).startswith("forethought:"))
WORKERS = [name for name in FORETHOUGHT if SERVICES[name]["command"][1] == "worker"]
UNPROBED = {"otel-collector"}  # its image has no shell or client to probe itself with (the file says so)


def settings_of(name: str, parse: ParseCommand) -> ServiceSettings:
    service = SERVICES[name]
    return parse(service["command"], {key: str(value) for key, value in service["environment"].items()})[1]


def test_docker_compose_validates_the_file_for_each_worker_profile() -> None:
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose is not installed, so the compose file cannot be validated: install the Debian "
                    "package (apt-get install docker-compose), which `docker-compose config` needs no Docker engine for")
    for profile in ("cpu", "gpu"):
        checked = subprocess.run(["docker-compose", "-f", str(COMPOSE_FILE), "config", "-q"], capture_output=True,
                                 text=True, env={**os.environ, "COMPOSE_PROFILES": profile})
        assert checked.returncode == 0, f"profile {profile}: {checked.stderr}"


def test_the_cluster_has_every_service_and_its_views() -> None:
    commands = {SERVICES[name]["command"][1] for name in FORETHOUGHT}
    assert commands == {"scheduler", "tokenizer", "predictor", "demand", "planner", "worker", "http"}
    assert {"redis", "jaeger", "otel-collector", "prometheus", "grafana"} <= set(SERVICES)
    assert (COMPOSE_DIR / ".env").read_text().splitlines()[-1] == "COMPOSE_PROFILES=cpu"


@pytest.mark.parametrize("name", FORETHOUGHT)
def test_each_command_is_one_the_cli_accepts_with_the_compose_environment(name: str, parse_service_command: ParseCommand) -> None:
    service, settings = parse_service_command(SERVICES[name]["command"], SERVICES[name]["environment"])
    assert service == SERVICES[name]["command"][1]
    assert settings.host == "0.0.0.0"
    assert settings.otel_exporter == "otlp"
    assert settings.redis_url == "redis://redis:6379/0"


@pytest.mark.parametrize("name", FORETHOUGHT)
def test_each_command_runs_in_the_cli_entry_point(name: str) -> None:
    """``forethought serve NAME ARGS --help`` as the image's entry point runs it, with compose's environment."""
    service = SERVICES[name]
    environ = {**os.environ, **{key: str(value) for key, value in service["environment"].items()}}
    shown = subprocess.run([sys.executable, "-m", "forethought.cli", *service["command"], "--help"],
                           capture_output=True, text=True, env=environ, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert f"forethought serve {service['command'][1]}" in shown.stdout


@pytest.mark.parametrize("name", sorted(set(SERVICES) - UNPROBED))
def test_every_service_has_a_health_check(name: str) -> None:
    assert SERVICES[name]["healthcheck"]["test"][0] == "CMD"


@pytest.mark.parametrize("name", FORETHOUGHT)
def test_health_checks_probe_the_port_the_service_listens_on(name: str, parse_service_command: ParseCommand) -> None:
    settings = settings_of(name, parse_service_command)
    probe = SERVICES[name]["healthcheck"]["test"]
    if SERVICES[name]["command"][1] == "http":
        assert f"http://127.0.0.1:{settings.port}/health" in probe[-1]
    else:
        assert probe == ["CMD", "python", "-m", "forethought.rpc.probe", f"127.0.0.1:{settings.port}"]


def test_services_wait_for_the_health_of_what_they_call(parse_service_command: ParseCommand) -> None:
    for name in FORETHOUGHT:
        depends = as_mapping(SERVICES[name]["depends_on"])
        assert depends["redis"] == {"condition": "service_healthy"}, name
        for other, condition in depends.items():
            if condition == {"condition": "service_healthy"}:
                assert "healthcheck" in SERVICES[other], f"{name} waits for the health of {other}, which has no check"
    scheduler = settings_of("scheduler", parse_service_command)
    http = settings_of("http", parse_service_command)
    for address, waits in ((scheduler.tokenizer_address, "scheduler"), (scheduler.predictor_address, "scheduler"),  # type: ignore[attr-defined]
                           (scheduler.demand_address, "scheduler"), (http.scheduler_address, "http")):  # type: ignore[attr-defined]
        host, port = address.split(":")
        assert SERVICES[waits]["depends_on"][host] == {"condition": "service_healthy"}
        assert settings_of(host, parse_service_command).port == int(port), address


def test_workers_advertise_their_own_address_and_ids_differ(parse_service_command: ParseCommand) -> None:
    ids = set()
    for name in WORKERS:
        settings = settings_of(name, parse_service_command)
        assert settings.advertise_address == f"{name}:{settings.port}"  # type: ignore[attr-defined]
        assert settings.engine == "vllm"  # type: ignore[attr-defined]
        ids.add(settings.worker_id)  # type: ignore[attr-defined]
    assert len(ids) == len(WORKERS)
    profiles = {name: SERVICES[name]["profiles"] for name in WORKERS}
    assert sorted(profiles.values()) == [["cpu"], ["cpu"], ["gpu"]]
    gpu = next(name for name, profile in profiles.items() if profile == ["gpu"])
    assert SERVICES[gpu]["build"]["target"] == "gpu"
    assert SERVICES[gpu]["deploy"]["resources"]["reservations"]["devices"] == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    assert all(SERVICES[name]["build"]["target"] == "cpu" for name in FORETHOUGHT if name != gpu)


def test_prometheus_scrapes_every_service_on_its_metrics_port(parse_service_command: ParseCommand) -> None:
    config = yaml.safe_load((COMPOSE_DIR / "prometheus.yml").read_text())
    targets = {target for job in config["scrape_configs"] if job["job_name"] == "forethought"
               for static in job["static_configs"] for target in static["targets"]}
    expected = {f"{name}:{settings_of(name, parse_service_command).metrics_port}" for name in FORETHOUGHT}
    assert targets == expected
    assert all(target.endswith(":9100") for target in targets)
    assert "./prometheus.yml:/etc/prometheus/prometheus.yml:ro" in SERVICES["prometheus"]["volumes"]


def test_services_export_traces_to_the_collector_which_forwards_them_to_jaeger(parse_service_command: ParseCommand) -> None:
    config = yaml.safe_load((COMPOSE_DIR / "otel-collector.yaml").read_text())
    receiver_port = config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].rpartition(":")[2]
    for name in FORETHOUGHT:
        assert settings_of(name, parse_service_command).otel_endpoint == f"otel-collector:{receiver_port}", name
    pipeline = config["service"]["pipelines"]["traces"]
    assert set(pipeline["receivers"]) <= set(config["receivers"])
    assert set(pipeline["processors"]) <= set(config["processors"])
    assert set(pipeline["exporters"]) <= set(config["exporters"])
    assert set(config["service"]["extensions"]) <= set(config["extensions"])
    jaeger = config["exporters"]["otlp/jaeger"]
    assert jaeger["endpoint"] == "jaeger:4317" and "otlp/jaeger" in pipeline["exporters"]
    assert SERVICES["jaeger"]["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"
    assert "16686:16686" in SERVICES["jaeger"]["ports"]
    assert "./otel-collector.yaml:/etc/otelcol/config.yaml:ro" in SERVICES["otel-collector"]["volumes"]


def test_the_image_is_slim_non_root_and_gets_a_cpu_build_of_torch() -> None:
    dockerfile = (COMPOSE_DIR / "Dockerfile").read_text()
    bases = re.findall(r"^FROM (\S+)", dockerfile, re.MULTILINE)
    assert {base for base in bases if ":" in base} == {"python:3.12-slim"}
    targets = set(re.findall(r"^FROM \S+ AS (\S+)", dockerfile, re.MULTILINE))
    assert {SERVICES[name]["build"]["target"] for name in FORETHOUGHT} <= targets
    assert re.search(r"^USER forethought$", dockerfile, re.MULTILINE)
    assert 'pip install "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu' in dockerfile
    for name in FORETHOUGHT:
        build = SERVICES[name]["build"]
        assert build["dockerfile"] == "compose/Dockerfile" and (COMPOSE_DIR / build["context"]).resolve() == REPO
