"""deploy/ runs the MCP HTTP server: a Kubernetes Deployment, Service, tokens from a Secret and a
NetworkPolicy that lets it reach only DNS and Redis; a Compose service on the profile "mcp"."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import kustomize
from tests.test_deploy import (
    DEPLOY,
    K8S,
    OLDEST_KUBERNETES,
    by_kind,
    compose,
    egress_allows,
    pod_labels,
    selects,
)

MCP_LABELS = {"app.kubernetes.io/name": "research-worker", "app.kubernetes.io/component": "mcp"}


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return kustomize.render(K8S)


def mcp_deployment(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    return by_kind(rendered, "Deployment")["research-mcp"]


def test_the_mcp_deployment_serves_http_on_every_pod_address_with_tokens_from_a_secret_volume(
    rendered: list[dict[str, Any]],
) -> None:
    deployment = mcp_deployment(rendered)
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    args = container["args"]
    assert args[:3] == ["research-worker", "mcp", "--http"]
    assert args[args.index("--host") + 1] == "0.0.0.0"
    port = int(args[args.index("--port") + 1])
    assert [p["containerPort"] for p in container["ports"]] == [port]
    env = {e["name"]: e for e in container["env"]}
    tokens_file = Path(env["RESEARCH_MCP_TOKENS_FILE"]["value"])
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    (tokens,) = [name for name, v in volumes.items() if "secret" in v]
    assert volumes[tokens]["secret"]["secretName"] == "research-mcp-tokens"
    assert tokens_file.parent == Path(mounts[tokens]["mountPath"]) and mounts[tokens]["readOnly"] is True
    assert env["REDIS_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "research-worker-secrets",
        "key": "REDIS_URL",
    }
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["automountServiceAccountToken"] is False
    # The token never travels as an environment variable (a revoked one would live until restart).
    assert all(
        "tokens" not in e.get("valueFrom", {}).get("secretKeyRef", {}).get("name", "") for e in env.values()
    )


def test_the_tokens_secret_example_has_the_key_the_deployment_reads_and_validates(
    rendered: list[dict[str, Any]],
) -> None:
    validate = pytest.importorskip("kubernetes_validate")
    secret = yaml.safe_load((K8S / "mcp-tokens.example.yaml").read_text())
    validate.validate(secret, OLDEST_KUBERNETES, strict=True)
    container = mcp_deployment(rendered)["spec"]["template"]["spec"]["containers"][0]
    tokens_file = {e["name"]: e for e in container["env"]}["RESEARCH_MCP_TOKENS_FILE"]["value"]
    assert secret["metadata"]["name"] == "research-mcp-tokens"
    assert Path(tokens_file).name in secret["stringData"]
    (digest,) = yaml.safe_load(secret["stringData"]["tokens.json"])  # JSON is YAML
    assert re.fullmatch(r"[0-9a-f]{64}", digest)


def test_the_service_and_the_policy_select_the_mcp_pods_and_no_others(rendered: list[dict[str, Any]]) -> None:
    deployments = by_kind(rendered, "Deployment")
    mcp = pod_labels(deployments["research-mcp"])
    assert selects(MCP_LABELS, mcp)
    others = [pod_labels(d) for name, d in deployments.items() if name != "research-mcp"]
    service = by_kind(rendered, "Service")["research-mcp"]
    policies = by_kind(rendered, "NetworkPolicy")
    mcp_policy = policies["research-mcp"]["spec"]
    for selector in (service["spec"]["selector"], mcp_policy["podSelector"]["matchLabels"]):
        assert selects(selector, mcp)
        assert not any(selects(selector, labels) for labels in others)
    # No other policy takes the MCP pods (the workers' would open public HTTPS to them).
    for name, policy in policies.items():
        if name != "research-mcp":
            assert not selects(policy["spec"]["podSelector"]["matchLabels"], mcp), name
    container = deployments["research-mcp"]["spec"]["template"]["spec"]["containers"][0]
    assert service["spec"]["ports"][0]["targetPort"] in {p["name"] for p in container["ports"]}


def test_the_mcp_pods_reach_only_dns_and_redis_and_only_the_ingress_reaches_them(
    rendered: list[dict[str, Any]],
) -> None:
    policy = by_kind(rendered, "NetworkPolicy")["research-mcp"]
    assert sorted(policy["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    egress = policy["spec"]["egress"]
    assert all("ipBlock" not in peer for rule in egress for peer in rule["to"])  # nothing outside
    reached = {(p.get("protocol", "TCP"), p["port"]) for rule in egress for p in rule["ports"]}
    assert reached == {("UDP", 53), ("TCP", 53), ("TCP", 6379), ("TCP", 26379)}
    redis_rules = [r for r in egress if any(p["port"] == 6379 for p in r["ports"])]
    assert [peer["podSelector"]["matchLabels"] for r in redis_rules for peer in r["to"]] == [
        {"app.kubernetes.io/name": "redis"}
    ]
    for address in ("93.184.216.34", "169.254.169.254", "10.0.0.1"):
        assert not egress_allows(policy, address, 443)
    (ingress,) = policy["spec"]["ingress"]
    assert ingress["ports"] == [{"protocol": "TCP", "port": 8301}]


def test_compose_runs_the_mcp_server_on_its_profile_as_a_redis_client_on_loopback() -> None:
    services = compose()["services"]
    mcp = services["mcp"]
    assert mcp["profiles"] == ["mcp"]
    assert mcp["command"][:3] == ["research-worker", "mcp", "--http"]
    assert re.match(r"redis://research-worker:", mcp["environment"]["REDIS_URL"])
    assert mcp["ports"] == ["127.0.0.1:8301:8301"]
    (secret,) = mcp["secrets"]
    assert mcp["environment"]["RESEARCH_MCP_TOKENS_FILE"] == f"/run/secrets/{secret}"
    assert "file" in compose()["secrets"][secret]
    assert mcp["depends_on"]["redis"]["condition"] == "service_healthy"
    assert mcp["environment"]["RESEARCH_QUEUE"] == services["worker"]["environment"]["RESEARCH_QUEUE"]
    # The caps are the workers' (they charge) and the dashboard's (it shows them).
    for name in ("worker", "dashboard"):
        assert "RESEARCH_ORG_DAILY_SEARCHES" in services[name]["environment"]


def test_the_compose_file_is_one_yaml_document_with_the_tls_override_covering_mcp() -> None:
    tls = compose("compose.tls.yaml")["services"]
    assert tls["mcp"]["environment"]["REDIS_URL"].startswith("rediss://research-worker:")
    assert (DEPLOY / "compose.yaml").read_text().count("\n---") == 0
