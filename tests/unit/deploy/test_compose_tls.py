"""The TLS overlay of the docker-compose cluster (compose/docker-compose.tls.yml), checked without a Docker
engine on the configuration ``docker-compose -f docker-compose.yml -f docker-compose.tls.yml config``
prints: every Forethought container mounts the certificates and runs its service with TLS on, the internal
services require the mesh certificate and the front doors do not, health checks probe over TLS, and the
certificate the documented ``scripts/make-certs`` command makes names every address a service dials.

The certificates directory is mounted at /certs; a path the container sees under it is checked at the
mount's source, where the certificates made here lie (``FORETHOUGHT_CERTS`` points the mount at them)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from forethought.config import ServiceSettings
from forethought.rpc.probe import arguments as probe_arguments

from tests.unit.deploy.conftest import COMPOSE_DIR, REPO, ParseCommand

BASE_FILE = COMPOSE_DIR / "docker-compose.yml"
TLS_FILE = COMPOSE_DIR / "docker-compose.tls.yml"
MOUNT = "/certs"
FRONT_DOORS = {"scheduler", "http"}  # callers authenticate with tokens there, not certificates
BASE: dict[str, Any] = yaml.safe_load(BASE_FILE.read_text())
FORETHOUGHT = sorted(name for name, service in BASE["services"].items()
                     if str(service.get("image", "")).startswith("forethought:"))
PROFILES = ("cpu", "gpu")


def make_certs_names(text: str) -> list[str]:
    """The NAMEs of the ``scripts/make-certs compose/certs NAME...`` command in ``text`` (a shell block or
    a comment; a trailing backslash continues the line)."""
    joined = re.sub(r"\\\n[#\s]*", " ", text)
    found = re.findall(r"scripts/make-certs compose/certs ([^\n#]+)", joined)
    assert len(found) == 1, f"expected one make-certs command, found {found}"
    return found[0].split()


def require_docker_compose() -> None:
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose is not installed, so the compose files cannot be merged: install the Debian "
                    "package (apt-get install docker-compose), which `docker-compose config` needs no Docker engine for")


def compose_config(files: tuple[Path, ...], profile: str, certs: Path, quiet: bool = False) -> subprocess.CompletedProcess[str]:
    require_docker_compose()
    flags = [arg for path in files for arg in ("-f", str(path))]
    return subprocess.run(["docker-compose", *flags, "config", *(["-q"] if quiet else [])], capture_output=True,
                          text=True, env={**os.environ, "COMPOSE_PROFILES": profile, "FORETHOUGHT_CERTS": str(certs)})


@functools.cache
def merged(files: tuple[Path, ...], profile: str, certs: Path) -> dict[str, dict[str, Any]]:
    """The services of the merged configuration."""
    printed = compose_config(files, profile, certs)
    assert printed.returncode == 0, printed.stderr
    return dict(yaml.safe_load(printed.stdout)["services"])


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The certificates of the command the overlay's header gives, made into a temporary directory."""
    folder = tmp_path_factory.mktemp("compose-certs")
    names = make_certs_names(TLS_FILE.read_text())
    subprocess.run([str(REPO / "scripts" / "make-certs"), str(folder), *names], check=True, capture_output=True)
    return folder


@pytest.fixture(scope="module", params=PROFILES)
def services(request: pytest.FixtureRequest, certs: Path) -> dict[str, dict[str, Any]]:
    return merged((BASE_FILE, TLS_FILE), request.param, certs)


def mount_of(service: dict[str, Any]) -> tuple[str, bool]:
    """(source, read-only) of the volume mounted at /certs."""
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, target, *mode = volume.split(":")
            read_only = mode == ["ro"]
        else:
            source, target, read_only = volume["source"], volume["target"], bool(volume.get("read_only"))
        if target == MOUNT:
            return source, read_only
    raise AssertionError(f"nothing is mounted at {MOUNT}: {service.get('volumes')}")


def host_environment(service: dict[str, Any]) -> dict[str, str]:
    """The container's environment with paths under /certs moved to the mount's source."""
    source, _ = mount_of(service)
    return {key: re.sub(rf"^{MOUNT}/", f"{source}/", str(value)) for key, value in service["environment"].items()}


def settings_of(service: dict[str, Any], parse: ParseCommand) -> ServiceSettings:
    return parse(service["command"], host_environment(service))[1]


def subject_alternative_names(certificate: Path) -> set[str]:
    shown = subprocess.run(["openssl", "x509", "-in", str(certificate), "-noout", "-ext", "subjectAltName"],
                           capture_output=True, text=True, check=True)
    entries = shown.stdout.splitlines()[1].split(",")
    return {entry.strip().split(":", 1)[1] for entry in entries}


def test_docker_compose_validates_the_two_files_for_each_worker_profile(certs: Path) -> None:
    for profile in PROFILES:
        checked = compose_config((BASE_FILE, TLS_FILE), profile, certs, quiet=True)
        assert checked.returncode == 0, f"profile {profile}: {checked.stderr}"


def test_the_overlay_names_only_forethought_services(services: dict[str, dict[str, Any]]) -> None:
    overlay = yaml.safe_load(TLS_FILE.read_text())["services"]
    assert sorted(overlay) == FORETHOUGHT
    assert set(services) == set(BASE["services"])


@pytest.mark.parametrize("name", FORETHOUGHT)
def test_every_forethought_container_mounts_the_certificates_read_only(
        name: str, services: dict[str, dict[str, Any]], certs: Path) -> None:
    assert mount_of(services[name]) == (str(certs), True)


@pytest.mark.parametrize("name", FORETHOUGHT)
def test_each_service_serves_tls_with_the_mesh_certificate_and_calls_trusting_the_ca(
        name: str, services: dict[str, dict[str, Any]], certs: Path, parse_service_command: ParseCommand) -> None:
    service, settings = parse_service_command(services[name]["command"], host_environment(services[name]))
    assert service == services[name]["command"][1]
    assert (settings.tls_cert, settings.tls_key, settings.tls_ca) == (
        str(certs / "mesh.pem"), str(certs / "mesh-key.pem"), str(certs / "ca.pem"))
    plaintext = parse_service_command(BASE["services"][name]["command"], BASE["services"][name]["environment"])[1]
    assert (plaintext.tls_cert, plaintext.tls_ca) == ("", "")  # the base file alone stays plaintext


@pytest.mark.parametrize("name", FORETHOUGHT)
def test_internal_services_require_the_mesh_certificate_and_the_front_doors_do_not(
        name: str, services: dict[str, dict[str, Any]], certs: Path, parse_service_command: ParseCommand) -> None:
    settings = settings_of(services[name], parse_service_command)
    internal = services[name]["command"][1] not in FRONT_DOORS
    assert settings.tls_client_ca == (str(certs / "ca.pem") if internal else "")


@pytest.mark.parametrize("name", FORETHOUGHT)
def test_health_checks_probe_the_service_over_tls(
        name: str, services: dict[str, dict[str, Any]], certs: Path, parse_service_command: ParseCommand) -> None:
    service = services[name]
    settings = settings_of(service, parse_service_command)
    test = service["healthcheck"]["test"]
    if service["command"][1] == "http":
        check = test[-1]
        compile(check, "healthcheck", "exec")
        assert f"urlopen('https://127.0.0.1:{settings.port}/health'" in check
        assert f"cafile='{MOUNT}/ca.pem'" in check
        return
    assert test[:4] == ["CMD", "python", "-m", "forethought.rpc.probe"]
    probe = probe_arguments(test[4:], host_environment(service))
    assert probe.address == f"127.0.0.1:{settings.port}"
    assert (probe.tls_ca, probe.tls_cert, probe.tls_key) == (settings.tls_ca, settings.tls_cert, settings.tls_key)
    assert probe.tls_ca == str(certs / "ca.pem") and probe.tls_cert == str(certs / "mesh.pem")


def test_redis_the_collector_and_the_views_are_untouched(certs: Path) -> None:
    for profile in PROFILES:
        base, overlaid = merged((BASE_FILE,), profile, certs), merged((BASE_FILE, TLS_FILE), profile, certs)
        for name in set(base) - set(FORETHOUGHT):
            assert overlaid[name] == base[name], name
        for name in FORETHOUGHT:
            changed = {key for key in base[name] if overlaid[name][key] != base[name][key]}
            assert changed <= {"environment", "healthcheck"}, name
            assert overlaid[name]["environment"]["FORETHOUGHT_REDIS_URL"].startswith("redis://")


def test_the_certificate_names_every_address_a_service_dials(
        services: dict[str, dict[str, Any]], certs: Path, parse_service_command: ParseCommand) -> None:
    dialled = {"127.0.0.1"}  # the health checks, inside each container
    for name in FORETHOUGHT:
        service_settings = settings_of(services[name], parse_service_command)
        for field in ("tokenizer_address", "predictor_address", "demand_address", "scheduler_address", "advertise_address"):
            address = getattr(service_settings, field, "")
            if address:
                dialled.add(address.rpartition(":")[0])
    assert {"tokenizer", "predictor", "demand", "scheduler", "worker-0", "worker-1", "worker-gpu-0"} <= dialled
    assert dialled <= subject_alternative_names(certs / "mesh.pem")


def test_the_mesh_certificate_serves_and_authenticates_callers_under_the_ca(certs: Path) -> None:
    usage = subprocess.run(["openssl", "x509", "-in", str(certs / "mesh.pem"), "-noout", "-ext", "extendedKeyUsage"],
                           capture_output=True, text=True, check=True).stdout
    assert "TLS Web Server Authentication" in usage and "TLS Web Client Authentication" in usage
    verified = subprocess.run(["openssl", "verify", "-CAfile", str(certs / "ca.pem"), str(certs / "mesh.pem")],
                              capture_output=True, text=True)
    assert verified.stdout.strip() == f"{certs / 'mesh.pem'}: OK"


def test_the_docs_give_the_same_make_certs_command_as_the_overlay() -> None:
    section = (REPO / "docs" / "access.md").read_text().split("### In compose", 1)[1].split("\n## ", 1)[0]
    assert make_certs_names(section) == make_certs_names(TLS_FILE.read_text())
    assert "-f compose/docker-compose.yml -f compose/docker-compose.tls.yml up" in section


def test_the_certificates_directory_is_never_committed() -> None:
    for name in ("ca.pem", "ca-key.pem", "mesh.pem", "mesh-key.pem"):
        ignored = subprocess.run(["git", "check-ignore", "-q", f"compose/certs/{name}"], cwd=REPO)
        assert ignored.returncode == 0, f"compose/certs/{name} is not ignored by git"
