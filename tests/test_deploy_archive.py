"""The evidence archive is on in both deployments: Compose runs MinIO and points the workers and the
dashboard at a bucket on it with a user of their own; Kubernetes reads the bucket and the
credentials from a Secret. Each deployment's settings are read by the worker's own parser (the
oracle for "the archive is on"), not by string matching."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import kustomize
from worker.config import ArchiveBucket, Settings

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
SECRET = "research-worker-archive"
# What compose would substitute for the required variables (any value will do for parsing).
REQUIRED = {
    "ARCHIVE_SECRET_KEY": "k" * 64,
    "MINIO_ROOT_PASSWORD": "r" * 64,
    "REDIS_WORKER_PASSWORD": "w" * 64,
    "REDIS_DASHBOARD_PASSWORD": "d" * 64,
    "RESEARCH_DASHBOARD_AUTH": "ops:password",
}


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((DEPLOY / "compose.yaml").read_text()))


def substituted(value: str) -> str:
    """Compose's ``${VAR:-default}`` and ``${VAR:?message}`` with nothing set but ``REQUIRED``."""

    def one(match: re.Match[str]) -> str:
        name, op, rest = match.group(1), match.group(2), match.group(3)
        if name in REQUIRED:
            return REQUIRED[name]
        if op == ":?":
            raise AssertionError(f"{name} is required by compose.yaml")
        return rest if op == ":-" else ""

    return re.sub(r"\$\{(\w+)(:-|:\?)?([^}]*)\}", one, value)


def service_settings(service: dict[str, Any]) -> Settings:
    env = {name: substituted(str(value)) for name, value in service["environment"].items()}
    env.setdefault("HOME", "/home/worker")
    return Settings.from_env(env)


@pytest.mark.parametrize("name", ["worker", "dashboard"])
def test_compose_points_the_workers_and_the_dashboard_at_the_minio_bucket(name: str) -> None:
    services = compose()["services"]
    settings = service_settings(services[name])
    assert settings.archive == ArchiveBucket("evidence", "")
    assert settings.archive_endpoint == "http://minio:9000"
    assert settings.archive_days >= 1 and settings.archive_operator
    env = services[name]["environment"]
    # Its own MinIO user, never the root one.
    assert env["AWS_ACCESS_KEY_ID"] != services["minio"]["environment"]["MINIO_ROOT_USER"]
    assert "minio" in services and "minio-data" in compose()["volumes"]


def test_compose_workers_start_after_the_bucket_and_their_user_exist() -> None:
    services = compose()["services"]
    assert services["worker"]["depends_on"]["archive-init"]["condition"] == "service_completed_successfully"
    init = services["archive-init"]
    assert init["depends_on"]["minio"]["condition"] == "service_healthy"
    assert "./archive:/archive:ro" in init["volumes"]
    script = (DEPLOY / "archive" / "init.sh").read_text()
    assert "mc mb --ignore-existing" in script and "mc admin user add archive research-archive" in script
    assert services["worker"]["environment"]["AWS_ACCESS_KEY_ID"] == "research-archive"
    # The MinIO API is for the other services only: nothing is published on the host.
    assert "ports" not in services["minio"]


def test_the_workers_minio_policy_grants_the_archive_bucket_and_nothing_else() -> None:
    bucket = service_settings(compose()["services"]["worker"]).archive
    assert isinstance(bucket, ArchiveBucket)
    policy = json.loads((DEPLOY / "archive" / "policy.json").read_text())
    resources = {r for statement in policy["Statement"] for r in statement["Resource"]}
    assert resources == {f"arn:aws:s3:::{bucket.bucket}", f"arn:aws:s3:::{bucket.bucket}/*"}
    actions = {a for statement in policy["Statement"] for a in statement["Action"]}
    assert not any(a.startswith("s3:*") or a.startswith("admin:") or "Policy" in a for a in actions)


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return [*kustomize.render(K8S), *kustomize.render(K8S / "render")]


def test_every_kubernetes_deployment_reads_the_archive_from_its_secret(objects: list[dict[str, Any]]) -> None:
    # The MCP server only enqueues jobs and reads their results: workers write the archive and
    # answer citations from it, so the server holds no archive credentials.
    deployments = {
        o["metadata"]["name"]: o
        for o in objects
        if o["kind"] == "Deployment" and o["metadata"]["name"] != "research-mcp"
    }
    assert len(deployments) >= 3  # workers, render workers, the dashboard
    for name, deployment in deployments.items():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            sources = container.get("envFrom", [])
            assert {"secretRef": {"name": SECRET}} in sources, name
            assert all(e["name"] != "RESEARCH_ARCHIVE" for e in container.get("env", [])), name


def test_the_config_map_no_longer_turns_the_archive_off(objects: list[dict[str, Any]]) -> None:
    (config,) = [
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "research-worker-config"
    ]
    assert "RESEARCH_ARCHIVE" not in config["data"]
    settings = Settings.from_env({"HOME": "/home/worker", **config["data"]})
    assert settings.archive_days >= 1 and settings.archive_operator


def test_the_secret_example_s_values_turn_the_archive_on_against_a_bucket() -> None:
    documents = list(yaml.safe_load_all((K8S / "secret.example.yaml").read_text()))
    (secret,) = [d for d in documents if d["metadata"]["name"] == SECRET]
    data = secret["stringData"]
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(data)
    settings = Settings.from_env({"HOME": "/home/worker", **data})
    assert isinstance(settings.archive, ArchiveBucket)
    assert settings.archive_endpoint is not None


def test_deploy_readme_says_how_the_archive_is_kept_and_how_to_size_its_retention() -> None:
    readme = (DEPLOY / "README.md").read_text()
    section = readme[readme.index("## Evidence archive") :]
    for needed in ("RESEARCH_ARCHIVE_DAYS", "research-worker-archive", "MinIO", "per day"):
        assert needed in section, needed
