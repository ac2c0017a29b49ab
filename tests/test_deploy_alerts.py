"""The alert rules (deploy/prometheus-alerts.yml) name only series that exist, and fire when they should.

Which series a worker exports is read from the registry its /metrics endpoint serves (the
exposition text of a fresh ``Metrics``); redis_exporter's and Prometheus' own series are listed
here by hand. promtool, when it is on the PATH, checks the rules' syntax and runs their unit tests
(deploy/prometheus-alerts.test.yml).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from worker.errors import ErrorKind
from worker.metrics import Metrics

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
RULES = DEPLOY / "prometheus-alerts.yml"
OPERATIONS = ROOT / "docs" / "operations.md"

# Series from elsewhere: Prometheus' own scrape health and redis_exporter's (deploy/compose.yaml).
EXTERNAL = {"up", "redis_up", "redis_memory_used_bytes", "redis_memory_max_bytes"}
# Outcomes that are the web's answer: jobs that ran and did what they could, not failures.
WEBS_ANSWER = {"ok", "http_status", "unsupported_content_type", "too_many_redirects"}

SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "by", "without", "on", "ignoring"}


def exported() -> dict[str, str]:
    """Every series name a worker's /metrics can carry, to the family (and type) it belongs to."""
    text = generate_latest(Metrics().registry).decode()
    names: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        names[family.name] = family.type
        for suffix in SUFFIXES.get(family.type, ()):
            names[family.name + suffix] = family.type
    return names


def rules() -> list[dict[str, object]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression selects (not its functions, keywords or label names)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        word = match.group(0)
        if word.lower() in PROMQL_WORDS or re.match(r"\s*\(", expr[match.end() :]):
            continue
        names.add(word)
    return names


def test_the_expression_reader_finds_series_and_skips_functions_and_labels() -> None:
    found = metric_names(
        'histogram_quantile(0.95, sum by (le, tool) (rate(a_seconds_bucket{tool=~"x|y"}[5m]))) > 60 '
        "and on (job) b_total / ignoring(x) (c > 0) unless absent(d)"
    )
    assert found == {"a_seconds_bucket", "b_total", "c", "d"}


def test_every_metric_an_alert_names_is_one_the_worker_or_redis_exporter_exports() -> None:
    names = exported()
    assert "process_resident_memory_bytes" in names
    assert "research_jobs_total" in names
    unknown = {}
    for rule in rules():
        for name in metric_names(str(rule["expr"])):
            if name not in names and name not in EXTERNAL:
                unknown[rule["alert"]] = name
    assert unknown == {}
    used = {name for rule in rules() for name in metric_names(str(rule["expr"]))}
    assert {n for n in used if n.startswith(("research_", "process_"))} >= {
        "research_jobs_in_progress",
        "research_queue_wait_seconds_bucket",
        "research_jobs_total",
        "process_resident_memory_bytes",
    }
    assert {"redis_memory_used_bytes", "redis_memory_max_bytes"} <= used


def test_every_outcome_kind_is_classified_for_the_error_share() -> None:
    (share,) = [rule for rule in rules() if rule["alert"] == "ResearchErrorShareHigh"]
    expr = str(share["expr"])
    failures = set(re.search(r'outcome=~"([^"]+)"', expr).group(1).split("|"))  # type: ignore[union-attr]
    agents = set(re.search(r'outcome!~"([^"]+)"', expr).group(1).split("|"))  # type: ignore[union-attr]
    kinds = {kind.value for kind in ErrorKind} | {"ok"}
    named = failures | agents | WEBS_ANSWER
    assert named <= kinds, f"not an outcome the worker reports: {sorted(named - kinds)}"
    # A new error kind must be placed: a failure of the service, the agent's own business, or the
    # web's answer (deploy/prometheus-alerts.yml's header says which is which).
    assert kinds - named == set(), f"classify in deploy/prometheus-alerts.yml: {sorted(kinds - named)}"
    assert not failures & agents and not failures & WEBS_ANSWER and not agents & WEBS_ANSWER
    assert "internal_error" in failures and "budget_exhausted" in agents and "url_not_in_menu" in agents


def test_every_alert_has_a_severity_a_summary_and_a_description() -> None:
    alerts = rules()
    assert len({rule["alert"] for rule in alerts}) == len(alerts)
    for rule in alerts:
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]  # type: ignore[index]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]  # type: ignore[index]
    brief = {"ResearchWorkersDown", "ResearchQueueWaitHigh", "ResearchErrorShareHigh", "RedisMemoryNearLimit"}
    assert brief <= {rule["alert"] for rule in alerts}


def test_the_kubernetes_prometheus_rule_carries_the_same_groups() -> None:
    rule = yaml.safe_load((DEPLOY / "k8s" / "prometheus-rule.yaml").read_text())
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"], (
        "copy deploy/prometheus-alerts.yml's groups into deploy/k8s/prometheus-rule.yaml's spec"
    )


def test_every_research_metric_the_deployment_and_the_docs_name_is_exported() -> None:
    # A renamed series must not leave a dashboard, an HPA or a page pointing at the old name.
    names = exported()
    files = [path for path in DEPLOY.rglob("*") if path.is_file() and path.suffix in {".yml", ".yaml", ".md"}]
    files += [ROOT / "README.md", OPERATIONS]
    stale = {}
    for path in files:
        for name in re.findall(r"\b(?:research|process)_[a-z_]+[a-z]\b", path.read_text()):
            if name not in names:
                stale[f"{path.relative_to(ROOT)}: {name}"] = name
    assert stale == {}


def test_the_operations_guide_catalogues_every_research_series() -> None:
    catalogue = OPERATIONS.read_text()
    families = {name for name, kind in exported().items() if name.startswith("research_")}
    # Each family under the name a query uses: counters with _total, histograms by their base name.
    missing = {
        name
        for name in families
        if not (exported()[name] == "counter" and not name.endswith("_total"))
        and not (exported()[name] == "histogram" and name.endswith(("_bucket", "_sum", "_count")))
        and f"`{name}`" not in catalogue
    }
    assert missing == set()


def test_promtool_accepts_the_rules_and_their_unit_tests_pass(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not on the PATH (.ci/run extracts it from Debian's prometheus package)")
    checked = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", str(DEPLOY / "prometheus-alerts.test.yml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # The Compose Prometheus configuration, with its rule file where the container mounts it.
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    config["rule_files"] = [str(RULES)]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    configured = subprocess.run(
        [promtool, "check", "config", "--syntax-only", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert configured.returncode == 0, configured.stdout + configured.stderr
