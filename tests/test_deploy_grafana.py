"""The Grafana board (deploy/grafana/research-worker.json) draws only series that exist, and covers
what an operator watches: jobs, latency, the queue, the page cache, hosts, budgets, the archive and
Redis. Which series a worker exports is read from a fresh registry, as for the alert rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.test_deploy_alerts import EXTERNAL, exported, metric_names

ROOT = Path(__file__).resolve().parents[1]
GRAFANA = ROOT / "deploy" / "grafana"
BOARD = GRAFANA / "research-worker.json"


def board() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(BOARD.read_text())
    return loaded


def drawn_panels() -> list[dict[str, Any]]:
    return [panel for panel in board()["panels"] if panel["type"] != "row"]


def expressions() -> list[str]:
    return [target["expr"] for panel in drawn_panels() for target in panel["targets"]]


def test_every_expression_names_series_a_worker_or_redis_exporter_exports() -> None:
    names = exported()
    unknown = {expr: sorted(metric_names(expr) - names.keys() - EXTERNAL) for expr in expressions()}
    assert {expr: missing for expr, missing in unknown.items() if missing} == {}


def test_every_panel_draws_at_least_one_series() -> None:
    for panel in drawn_panels():
        assert panel["targets"], panel["title"]
        assert all(metric_names(target["expr"]) for target in panel["targets"]), panel["title"]


@pytest.mark.parametrize(
    ("topic", "series"),
    [
        ("jobs by tool and outcome", "research_jobs_total"),
        ("latency quantiles", "research_job_duration_seconds_bucket"),
        ("queue depth", "research_queue_depth"),
        ("queue wait", "research_queue_wait_seconds_bucket"),
        ("cache hits", "research_page_cache_hits_total"),
        ("host holds", "research_host_waits_total"),
        ("budgets exhausted", "research_budget_refusals_total"),
        ("archive backlog", "research_archive_queue"),
        ("Redis memory", "redis_memory_used_bytes"),
    ],
)
def test_the_board_covers_what_an_operator_watches(topic: str, series: str) -> None:
    drawn = {name for expr in expressions() for name in metric_names(expr)}
    assert series in drawn, f"no panel draws {topic} ({series})"


def test_the_tool_and_outcome_panel_splits_by_both_labels() -> None:
    (panel,) = [p for p in drawn_panels() if p["title"] == "Jobs by tool and outcome"]
    assert "sum by (tool, outcome)" in panel["targets"][0]["expr"]


def test_panels_have_unique_ids_and_do_not_overlap() -> None:
    panels = board()["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def test_every_query_reads_the_chosen_data_source() -> None:
    variables = {v["name"]: v for v in board()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    for panel in drawn_panels():
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_compose_provisions_the_board_with_prometheus_as_its_source() -> None:
    services = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())["services"]
    grafana = services["grafana"]
    mounts = {volume.split(":")[0]: volume.split(":")[1] for volume in grafana["volumes"]}
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "research-worker.yaml").read_text())
    (source,) = provider["providers"]
    assert mounts["./grafana/research-worker.json"].startswith(source["options"]["path"] + "/")
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    datasources = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    (prometheus,) = datasources["datasources"]
    assert prometheus["type"] == "prometheus" and prometheus["url"] == "http://prometheus:9090"
    assert "prometheus" in services and all(port.startswith("127.0.0.1:") for port in grafana["ports"])
