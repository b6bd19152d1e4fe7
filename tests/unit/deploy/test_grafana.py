"""The Grafana dashboard and its provisioning: valid JSON, the panels the cluster is watched by, and only
metrics the services really export."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from tests.unit.deploy.conftest import COMPOSE_DIR, string_literals_in_package

DASHBOARD_FILE = COMPOSE_DIR / "grafana" / "dashboards" / "forethought.json"
PROVISIONING = COMPOSE_DIR / "grafana" / "provisioning"
DASHBOARD: dict[str, Any] = json.loads(DASHBOARD_FILE.read_text())
PANELS = [panel for panel in DASHBOARD["panels"] if panel["type"] != "row"]
EXPRESSIONS = [target["expr"] for panel in PANELS for target in panel["targets"]]
HISTOGRAM_SUFFIX = re.compile(r"_(bucket|sum|count)$")


def metric_names(expression: str) -> set[str]:
    """The Forethought series an expression reads, histogram series named by their histogram."""
    return {HISTOGRAM_SUFFIX.sub("", name) for name in re.findall(r"\bforethought_[a-z_]+", expression)}


def test_metric_names_are_read_from_expressions() -> None:
    assert metric_names('histogram_quantile(0.5, sum by (le) (rate(forethought_queue_wait_seconds_bucket[5m])))'
                        ' / forethought_worker_running{service_class="rt"}') == {
        "forethought_queue_wait_seconds", "forethought_worker_running"}


@pytest.mark.parametrize("name", sorted(set().union(*map(metric_names, EXPRESSIONS))))
def test_every_metric_the_dashboard_queries_is_exported_by_the_code(name: str) -> None:
    assert f'"{name}"' in string_literals_in_package(), f"no service exports {name}"


def test_the_dashboard_has_the_panels_the_cluster_is_watched_by() -> None:
    rows = [panel["title"] for panel in DASHBOARD["panels"] if panel["type"] == "row"]
    assert rows == ["Workers", "Queue", "Placements and prefix hits", "Service-level objectives", "Applications", "Services"]
    titles = {panel["title"] for panel in PANELS}
    assert {"Queue depth at the scheduler", "Placements by router decision", "Prefix hit ratio", "SLO attainment",
            "Demand service calls", "Running by worker and class", "KV cache use", "Tokens per second", "Prewarms"} <= titles
    assert all(panel["targets"] and all(target["expr"] for target in panel["targets"]) for panel in PANELS)
    assert len({panel["id"] for panel in DASHBOARD["panels"]}) == len(DASHBOARD["panels"])


def test_provisioning_points_at_the_dashboard_and_the_datasources_it_uses() -> None:
    datasources = yaml.safe_load((PROVISIONING / "datasources" / "datasources.yaml").read_text())["datasources"]
    by_uid = {source["uid"]: source for source in datasources}
    used = {panel["datasource"]["uid"] for panel in PANELS}
    assert used == {"prometheus"}
    assert by_uid["prometheus"]["url"] == "http://prometheus:9090" and by_uid["jaeger"]["url"] == "http://jaeger:16686"
    providers = yaml.safe_load((PROVISIONING / "dashboards" / "dashboards.yaml").read_text())["providers"]
    compose = yaml.safe_load((COMPOSE_DIR / "docker-compose.yml").read_text())
    mounts = dict(volume.rsplit(":", 1)[0].split(":") for volume in compose["services"]["grafana"]["volumes"])
    assert mounts["./grafana/dashboards"] == providers[0]["options"]["path"]
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
