"""The TLS and tenant settings: each broken combination stops the service with the setting and rule named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from forethought.access import token_hash
from forethought.config import ConfigError, ServiceSettings
from forethought.services.scheduler.shell import Settings as SchedulerSettings


@pytest.fixture
def pem(tmp_path: Path) -> str:
    path = tmp_path / "some.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return str(path)


@pytest.mark.parametrize(("fields", "flag", "rule"), [
    ({"tls_cert": "PEM"}, "--tls-key", "go together"),
    ({"tls_key": "PEM"}, "--tls-cert", "go together"),
    ({"tls_cert": "/nowhere.pem", "tls_key": "PEM"}, "--tls-cert", "must be a PEM file that exists"),
    ({"tls_ca": "/nowhere.pem"}, "--tls-ca", "must be a PEM file that exists"),
    ({"tls_client_ca": "PEM"}, "--tls-client-ca", "needs --tls-cert"),
], ids=["cert-alone", "key-alone", "missing-cert", "missing-ca", "client-ca-without-cert"])
def test_a_broken_tls_setting_names_itself(pem: str, fields: dict[str, str], flag: str, rule: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ServiceSettings(**{name: pem if value == "PEM" else value for name, value in fields.items()})
    assert flag in str(raised.value) and rule in str(raised.value)


def test_a_whole_tls_setting_is_accepted(pem: str) -> None:
    settings = ServiceSettings(tls_cert=pem, tls_key=pem, tls_ca=pem, tls_client_ca=pem)
    assert settings.tls_client_ca == pem


def test_fair_share_and_shared_quotas_need_tenants(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--fair-share.*needs --tenants-file"):
        SchedulerSettings(fair_share=True)
    with pytest.raises(ConfigError, match="--shared-quotas.*needs --tenants-file"):
        SchedulerSettings(shared_quotas=True)
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(yaml.safe_dump({"tenants": [{"name": "a", "token_sha256": token_hash("t")}]}))
    settings = SchedulerSettings(fair_share=True, tenants_file=str(tenants))
    book = settings.tenants()
    assert book is not None and set(book.tenants) == {"a"}


def test_an_unreadable_tenants_file_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--tenants-file.*must end in .yaml"):
        SchedulerSettings(tenants_file=str(tmp_path / "tenants.txt"))
    with pytest.raises(ConfigError, match="--tenants-file"):
        SchedulerSettings(tenants_file=str(tmp_path / "absent.yaml"))
