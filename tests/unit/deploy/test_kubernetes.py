"""The Kubernetes manifests, checked without a cluster: every object validates against the Kubernetes
schemas (kubernetes-validate, strict), Services reach the pods and ports they name, every container's
command is one the CLI accepts with the ConfigMap's environment, and probes watch the ports served."""

from __future__ import annotations

import re
from typing import Any

import kubernetes_validate
import pytest
import yaml
from forethought.config import ServiceSettings

from tests.unit.deploy.conftest import KUBERNETES_DIR, ParseCommand

KUSTOMIZATION = yaml.safe_load((KUBERNETES_DIR / "kustomization.yaml").read_text())
FILES = sorted(path.name for path in KUBERNETES_DIR.glob("*.yaml") if path.name != "kustomization.yaml")
OBJECTS: list[dict[str, Any]] = [doc for name in FILES for doc in yaml.safe_load_all((KUBERNETES_DIR / name).read_text()) if doc]
WORKLOADS = {obj["metadata"]["name"]: obj for obj in OBJECTS if obj["kind"] in ("Deployment", "StatefulSet")}
SERVICES = {obj["metadata"]["name"]: obj for obj in OBJECTS if obj["kind"] == "Service"}
SETTINGS = next(obj["data"] for obj in OBJECTS if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == "forethought-settings")
FORETHOUGHT = sorted(name for name, obj in WORKLOADS.items()
                     if obj["spec"]["template"]["spec"]["containers"][0]["image"].startswith("forethought"))
KUBERNETES_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
POD_IP = "10.1.2.3"


def container(name: str) -> dict[str, Any]:
    containers = WORKLOADS[name]["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, name
    return containers[0]


def environment(name: str) -> dict[str, str]:
    """The container's FORETHOUGHT_* environment: the ConfigMap, then its own variables ($(VAR) expanded)."""
    spec = container(name)
    assert spec["envFrom"] == [{"configMapRef": {"name": "forethought-settings"}}], name
    values = dict(SETTINGS)
    fields = {"metadata.name": f"{name}-0", "status.podIP": POD_IP}
    for variable in spec.get("env", []):
        if "valueFrom" in variable:
            values[variable["name"]] = fields[variable["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            values[variable["name"]] = re.sub(r"\$\((\w+)\)", lambda match: values[match.group(1)], variable["value"])
    return values


def settings_of(name: str, parse: ParseCommand) -> ServiceSettings:
    return parse(container(name)["args"], environment(name))[1]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("obj", OBJECTS, ids=[f"{obj['kind']}/{obj['metadata']['name']}" for obj in OBJECTS])
def test_every_object_validates_against_the_kubernetes_schema(obj: dict[str, Any], version: str) -> None:
    kubernetes_validate.validate(obj, version, strict=True)


def test_the_validator_refuses_a_field_kubernetes_does_not_have() -> None:
    broken = {**WORKLOADS["scheduler"], "spec": {**WORKLOADS["scheduler"]["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[0], strict=True)


def test_kustomize_applies_every_manifest_into_one_namespace() -> None:
    assert sorted(KUSTOMIZATION["resources"]) == FILES
    namespaces = [obj["metadata"]["name"] for obj in OBJECTS if obj["kind"] == "Namespace"]
    assert namespaces == [KUSTOMIZATION["namespace"]]
    assert {image["name"] for image in KUSTOMIZATION["images"]} == {
        container(name)["image"] for name in FORETHOUGHT}


def test_every_service_of_the_mesh_runs() -> None:
    assert {container(name)["args"][1] for name in FORETHOUGHT} == {
        "scheduler", "tokenizer", "predictor", "demand", "planner", "worker", "http"}
    assert "redis" in WORKLOADS


@pytest.mark.parametrize("name", FORETHOUGHT)
def test_each_command_is_one_the_cli_accepts_with_the_configmap(name: str, parse_service_command: ParseCommand) -> None:
    service, settings = parse_service_command(container(name)["args"], environment(name))
    assert service == name
    assert settings.host == "0.0.0.0"
    assert settings.redis_url == f"redis://redis:{SERVICES['redis']['spec']['ports'][0]['port']}/0"


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_container_has_readiness_and_liveness_probes_on_its_ports(name: str, parse_service_command: ParseCommand) -> None:
    spec = container(name)
    ports = {port["name"]: port["containerPort"] for port in spec["ports"]}
    for kind in ("readinessProbe", "livenessProbe"):
        probe = spec[kind]
        if "grpc" in probe:
            assert probe["grpc"]["port"] == ports["grpc"] == settings_of(name, parse_service_command).port
        elif "httpGet" in probe:
            assert ports[probe["httpGet"]["port"]] == settings_of(name, parse_service_command).port
            assert probe["httpGet"]["path"] in ("/health", "/ready")
        else:
            assert name == "redis"
    if name in FORETHOUGHT:
        assert ports["metrics"] == settings_of(name, parse_service_command).metrics_port
        assert WORKLOADS[name]["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == str(ports["metrics"])


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_each_kubernetes_service_selects_pods_serving_its_target_ports(name: str) -> None:
    service = SERVICES[name]
    selected = [workload for workload in WORKLOADS.values()
                if service["spec"]["selector"].items() <= workload["spec"]["template"]["metadata"]["labels"].items()]
    assert len(selected) == 1, name
    ports = {port["name"] for port in selected[0]["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert {port["targetPort"] for port in service["spec"]["ports"]} <= ports


def test_addresses_in_commands_name_services_and_their_ports(parse_service_command: ParseCommand) -> None:
    scheduler = settings_of("scheduler", parse_service_command)
    http = settings_of("http", parse_service_command)
    for address in (scheduler.tokenizer_address, scheduler.predictor_address, scheduler.demand_address,  # type: ignore[attr-defined]
                    http.scheduler_address):  # type: ignore[attr-defined]
        host, port = address.split(":")
        assert int(port) in {entry["port"] for entry in SERVICES[host]["spec"]["ports"]}, address


def test_two_schedulers_share_redis_behind_one_service() -> None:
    assert WORKLOADS["scheduler"]["spec"]["replicas"] == 2
    assert environment("scheduler")["FORETHOUGHT_REDIS_URL"] == "redis://redis:6379/0"
    assert WORKLOADS["redis"]["spec"]["replicas"] == 1


def test_two_planners_share_redis_so_one_takes_up_the_runs_of_the_other() -> None:
    assert WORKLOADS["planner"]["spec"]["replicas"] == 2
    assert environment("planner")["FORETHOUGHT_REDIS_URL"] == environment("scheduler")["FORETHOUGHT_REDIS_URL"]


def test_workers_are_a_statefulset_with_a_gpu_each_advertising_their_pod(parse_service_command: ParseCommand) -> None:
    workers = WORKLOADS["worker"]
    assert workers["kind"] == "StatefulSet"
    assert SERVICES[workers["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"
    resources = container("worker")["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == resources["requests"]["nvidia.com/gpu"] == 1
    settings = settings_of("worker", parse_service_command)
    assert (settings.worker_id, settings.advertise_address, settings.engine) == (  # type: ignore[attr-defined]
        "worker-0", f"{POD_IP}:{settings.port}", "vllm")
    assert container("worker")["startupProbe"]["grpc"]["port"] == settings.port
