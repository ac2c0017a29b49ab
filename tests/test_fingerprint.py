"""Workers on one queue publish the settings that change results; ``run`` warns when it joins a
queue whose workers differ, naming the settings and never their values; the dashboard shows it."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import orjson
import pytest
import redis.asyncio as aioredis
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.processes import ROOT, settings_env, start_worker, stop, wait_healthy
from tests.support.tls import TestCA
from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from worker.config import Secret, Settings
from worker.dashboard.data import collect
from worker.dashboard.filters import Filters
from worker.dashboard.views import state_document
from worker.runtime import fingerprint

# Two valid values for each published setting: changing it alone changes exactly its own name.
VARIANTS: dict[str, tuple[str, str]] = {
    "RESEARCH_GUARDIAN_ALLOW_CIDRS": ("", "127.0.0.1/32"),
    "RESEARCH_URL_MENU": ("on", "off"),
    "RESEARCH_BLOCKED_DOMAINS": ("", "example.org"),
    "RESEARCH_ALLOWED_DOMAINS": ("", "example.org,example.net"),
    "RESEARCH_ROBOTS": ("off", "on"),
    "RESEARCH_READ_BUDGET_CHARS": ("2000000", "0"),
    "RESEARCH_SEARCH_BUDGET": ("15", "16"),
    "RESEARCH_FETCH_BUDGET": ("25", "3"),
    "RESEARCH_BUDGET_WINDOW_S": ("86400", "60"),
    "RESEARCH_FETCH_MAX_BYTES": ("2097152", "1000"),
    "RESEARCH_FETCH_MAX_PDF_BYTES": ("16777216", "1000"),
    "RESEARCH_FETCH_MAX_CHARS": ("40000", "500"),
    "RESEARCH_FETCH_MAX_REDIRECTS": ("5", "0"),
    "RESEARCH_FETCH_TIMEOUT_S": ("20", "2.5"),
    "RESEARCH_SEARCH_TIMEOUT_S": ("60", "30"),
    "RESEARCH_REDUCE_CPU_BUDGET_S": ("3", "1"),
    "RESEARCH_RESULT_TTL_S": ("86400", "30"),
    "RESEARCH_CACHE_TTL_S": ("900", "0"),
    "RESEARCH_USER_AGENT": ("a/1", "b/2"),
    "RESEARCH_SEARCH_MODEL": ("openai/gpt-4.1-nano", "openai/gpt-4o-mini"),
    "RESEARCH_SEARCH_ENGINE": ("auto", "exa"),
    "OPENROUTER_BASE_URL": ("https://openrouter.ai/api/v1", "http://127.0.0.1:9/api/v1"),
    "OPENROUTER_API_KEY": ("", "sk-or-v1-" + "ab" * 32),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_changing_one_setting_changes_the_fingerprint_by_that_name_alone(name: str) -> None:
    first, second = (Settings.from_env({name: value}) for value in VARIANTS[name])
    a, b = fingerprint.published(first), fingerprint.published(second)
    assert a["digest"] != b["digest"]
    assert fingerprint.differing(a["values"], b["values"]) == [name]


def test_every_published_name_is_a_configuration_variable() -> None:
    contract = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    for name in fingerprint.values_of(Settings()):
        assert f"`{name}`" in contract, name


def test_the_same_settings_give_the_same_fingerprint_on_any_host() -> None:
    a = Settings.from_env({"RESEARCH_WORKER_ID": "one", "RESEARCH_MAX_JOBS": "3"})
    b = Settings.from_env({"RESEARCH_WORKER_ID": "two", "RESEARCH_MAX_JOBS": "64"})
    assert fingerprint.published(a) == fingerprint.published(b)  # ids and slots do not change results


SECRETISH = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=8, max_size=40).map(
    lambda s: f"Zq{s}"
)


@settings(max_examples=100, deadline=None)
@given(api_key=SECRETISH, org_key=SECRETISH, password=SECRETISH)
def test_no_secret_is_published(api_key: str, org_key: str, password: str) -> None:
    s = dataclasses.replace(
        Settings(),
        openrouter_api_key=Secret(api_key),
        org_keys={"acme": Secret(org_key)},
        searxng_url=f"https://ops:{password}@search.example",
        openrouter_base_url=f"https://u:{password}@openrouter.example/api/v1",
    )
    text = orjson.dumps(fingerprint.published(s)).decode()
    for secret in (api_key, org_key, password):
        assert secret not in text
    assert "acme" in text  # the org id says which orgs are served, never with what key


def test_a_foreign_or_hostile_health_beat_has_no_fingerprint_or_a_bounded_one() -> None:
    assert fingerprint.read({}) is None
    assert fingerprint.read({"settings": "yes"}) is None
    assert fingerprint.read({"settings": {"values": list(range(5))}}) is None
    assert fingerprint.read({"settings": {"values": {str(n): "x" for n in range(1000)}}}) is None
    read = fingerprint.read({"settings": {"values": {"A": "x" * 10_000, "B": {"nested": 1}}}})
    assert read is not None and read.values == {"A": "x" * fingerprint.MAX_VALUE_CHARS}


async def test_run_warns_when_it_joins_a_queue_whose_worker_differs_naming_settings_not_values(
    settings: Settings, ca: TestCA
) -> None:
    first = start_worker(settings, "readme", env={"RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.2/32"})
    try:
        wait_healthy(settings, 1)
        env = settings_env(
            settings,
            RESEARCH_WORKER_ID=f"{settings.worker_id}-tour",
            RESEARCH_GUARDIAN_ALLOW_CIDRS="127.0.0.1/32",
            RESEARCH_CA_BUNDLE=str(ca.bundle),  # a CA the other worker does not trust
            RESEARCH_LOG_FORMAT="json",
        )
        joined = subprocess.run(
            [sys.executable, "-m", "tests.support.run_cli", "run", "--burst"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        stop(first)
    assert joined.returncode == 0, joined.stderr
    lines = [json.loads(line) for line in joined.stderr.splitlines() if line.startswith("{")]
    [warning] = [line for line in lines if line.get("differing")]
    assert warning["level"] == "warning"
    assert warning["other_worker"] == f"{settings.worker_id}-readme"
    assert warning["differing"] == ["RESEARCH_CA_BUNDLE", "RESEARCH_GUARDIAN_ALLOW_CIDRS"]
    assert "127.0.0.2" not in warning["msg"] and "127.0.0.1/32" not in warning["msg"]
    assert "RESEARCH_GUARDIAN_ALLOW_CIDRS" in warning["msg"]


async def test_run_says_nothing_when_the_queues_workers_agree(settings: Settings) -> None:
    first = start_worker(settings, "same")
    try:
        wait_healthy(settings, 1)
        env = settings_env(
            settings, RESEARCH_WORKER_ID=f"{settings.worker_id}-other", RESEARCH_LOG_FORMAT="json"
        )
        joined = subprocess.run(
            [sys.executable, "-m", "tests.support.run_cli", "run", "--burst"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        stop(first)
    assert joined.returncode == 0, joined.stderr
    assert "differing" not in joined.stderr
    # Its first lines also say which Redis it uses, and why.
    [using] = [line for line in joined.stderr.splitlines()[:3] if "using Redis at" in line]
    assert f"using Redis at {settings.redis_url} (configured by REDIS_URL)" in using


async def test_the_dashboard_names_the_settings_the_live_workers_differ_on(
    settings: Settings, redis: aioredis.Redis
) -> None:
    other = dataclasses.replace(
        settings, worker_id=f"{settings.worker_id}-b", url_menu=False, fetch_max_chars=500
    )
    async with running_worker(settings, TEST_TOOLS), running_worker(other, TEST_TOOLS):
        snap = await collect(redis, settings)  # type: ignore[arg-type]
    document = state_document(snap, Filters())
    assert document["settings_differ"] == ["RESEARCH_FETCH_MAX_CHARS", "RESEARCH_URL_MENU"]
    digests = {worker["worker_id"]: worker["settings_digest"] for worker in document["workers"]}
    assert len(set(digests.values())) == 2 and None not in digests.values()


async def test_the_dashboard_shows_no_difference_for_workers_that_agree(
    settings: Settings, redis: aioredis.Redis
) -> None:
    twin = dataclasses.replace(settings, worker_id=f"{settings.worker_id}-twin")
    async with running_worker(settings, TEST_TOOLS), running_worker(twin, TEST_TOOLS):
        snap = await collect(redis, settings)  # type: ignore[arg-type]
    assert state_document(snap, Filters())["settings_differ"] == []
