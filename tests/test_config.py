"""Configuration: one object from the environment; a bad value stops start-up with a line naming it."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys

import pytest

from worker.config import ConfigError, SearchProvider, Secret, Settings
from worker.state.redis_conn import parse_redis_url


def test_defaults_follow_the_contract() -> None:
    s = Settings.from_env({})
    assert (s.search_budget, s.fetch_budget) == (15, 25)
    assert s.budget_window_s == 24 * 3600
    assert s.fetch_max_bytes == 2_097_152
    assert s.fetch_max_chars == 40_000
    assert s.fetch_max_redirects == 5
    assert s.fetch_timeout_s == 20
    assert s.url_menu is True
    assert s.usage_source == "mcp-research"
    assert s.guardian_allow_cidrs == ()
    assert s.metrics_port is None
    assert s.redis_url is None


def test_every_contract_variable_is_read() -> None:
    env = {
        "REDIS_URL": "redis://cache:6380/2",
        "RESEARCH_QUEUE": "q1",
        "RESEARCH_MAX_JOBS": "4",
        "RESEARCH_SEARCH_BUDGET": "3",
        "RESEARCH_FETCH_BUDGET": "7",
        "RESEARCH_BUDGET_WINDOW_S": "60",
        "RESEARCH_FETCH_MAX_BYTES": "1000",
        "RESEARCH_FETCH_MAX_CHARS": "500",
        "RESEARCH_FETCH_MAX_REDIRECTS": "0",
        "RESEARCH_FETCH_TIMEOUT_S": "2.5",
        "RESEARCH_RESULT_TTL_S": "30",
        "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32, ::1/128",
        "RESEARCH_URL_MENU": "off",
        "RESEARCH_METRICS_PORT": "9100",
        "RESEARCH_DASHBOARD_AUTH": "ops:s3cret",
        "OPENROUTER_API_KEY": "sk-or-test",
        "OPENROUTER_BASE_URL": "http://127.0.0.1:9999/api/v1/",
        "RESEARCH_SEARCH_MODEL": "openai/gpt-4o-mini",
        "RESEARCH_USAGE_SOURCE": "mcp-research-eu",
    }
    s = Settings.from_env(env)
    assert s.redis_url == "redis://cache:6380/2"
    assert s.redis_target.database == 2
    assert (s.queue_name, s.max_jobs, s.search_budget, s.fetch_budget) == ("q1", 4, 3, 7)
    assert (s.budget_window_s, s.fetch_max_bytes, s.fetch_max_chars) == (60, 1000, 500)
    assert (s.fetch_max_redirects, s.fetch_timeout_s, s.result_ttl_s) == (0, 2.5, 30)
    assert s.guardian_allow_cidrs == (
        ipaddress.ip_network("127.0.0.1/32"),
        ipaddress.ip_network("::1/128"),
    )
    assert s.url_menu is False
    assert s.metrics_port == 9100
    assert s.dashboard_auth == ("ops", Secret("s3cret"))
    assert s.openrouter_api_key.reveal() == "sk-or-test"
    assert s.openrouter_base_url == "http://127.0.0.1:9999/api/v1"
    assert s.search_model == "openai/gpt-4o-mini"
    assert s.usage_source == "mcp-research-eu"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RESEARCH_SEARCH_BUDGET", "0"),
        ("RESEARCH_SEARCH_BUDGET", "-3"),
        ("RESEARCH_FETCH_BUDGET", "ten"),
        ("RESEARCH_FETCH_BUDGET", "2.5"),
        ("RESEARCH_FETCH_MAX_BYTES", "-1"),
        ("RESEARCH_FETCH_MAX_CHARS", "0"),
        ("RESEARCH_FETCH_MAX_REDIRECTS", "-1"),
        ("RESEARCH_FETCH_TIMEOUT_S", "0"),
        ("RESEARCH_FETCH_TIMEOUT_S", "nan"),
        ("RESEARCH_BUDGET_WINDOW_S", "forever"),
        ("RESEARCH_RESULT_TTL_S", "-5"),
        ("RESEARCH_MAX_JOBS", "0"),
        ("RESEARCH_GUARDIAN_ALLOW_CIDRS", "10.0.0.0/33"),
        ("RESEARCH_GUARDIAN_ALLOW_CIDRS", "10.0.0.1/8"),
        ("RESEARCH_GUARDIAN_ALLOW_CIDRS", "localhost"),
        ("RESEARCH_URL_MENU", "maybe"),
        ("RESEARCH_METRICS_PORT", "70000"),
        ("RESEARCH_DASHBOARD_AUTH", "no-colon"),
        ("RESEARCH_CA_BUNDLE", "/nonexistent/ca.pem"),
        ("REDIS_URL", "http://localhost:6379"),
        ("REDIS_URL", "redis://localhost:notaport"),
        ("REDIS_URL", "redis://localhost:6379/db"),
        ("REDIS_URL", "redis+sentinel://s1:26379"),
        ("OPENROUTER_BASE_URL", "ftp://openrouter.ai"),
        ("RESEARCH_SEARCH_MODEL", "openai/gpt-5"),
    ],
)
def test_a_bad_value_is_a_clear_error_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({variable: value})
    message = str(caught.value)
    assert message.startswith(f"{variable}: ")
    assert "\n" not in message


def test_a_redis_password_never_appears_in_an_error() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"REDIS_URL": "redis://user:hunter2@localhost:notaport"})
    assert "hunter2" not in str(caught.value)


def test_the_api_key_never_shows_in_a_repr() -> None:
    s = Settings.from_env({"OPENROUTER_API_KEY": "sk-or-very-secret"})
    assert "sk-or-very-secret" not in repr(s)
    assert "sk-or-very-secret" not in str(s.openrouter_api_key)


def test_sentinel_urls_name_hosts_master_and_database() -> None:
    target = parse_redis_url("redis+sentinel://s1:26379,s2:26380/mymaster/3")
    assert target.sentinels == (("s1", 26379), ("s2", 26380))
    assert target.sentinel_master == "mymaster"
    assert target.database == 3


def test_the_grace_period_defaults_to_the_job_timeout() -> None:
    s = Settings.from_env({})
    assert s.grace_s == s.job_timeout_s
    assert s.job_timeout_s > s.fetch_timeout_s
    assert s.job_timeout_s > s.search_timeout_s


def test_the_worker_refuses_to_start_with_a_bad_value() -> None:
    env = {**os.environ, "RESEARCH_FETCH_BUDGET": "-1"}
    proc = subprocess.run(
        [sys.executable, "-m", "worker.cli", "run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "research-worker: configuration error: RESEARCH_FETCH_BUDGET: '-1' must be a positive integer"
    ]


def test_search_defaults_to_the_web_plugin_with_no_fallback() -> None:
    s = Settings.from_env({})
    assert s.search_provider is SearchProvider.OPENROUTER_PLUGIN
    assert (s.search_fallback, s.search_engine, s.searxng_url) == (None, None, None)


def test_search_providers_engine_and_fallback_are_read() -> None:
    s = Settings.from_env(
        {
            "RESEARCH_SEARCH_PROVIDER": "searxng",
            "SEARXNG_URL": "http://searxng.internal:8080/",
            "RESEARCH_SEARCH_FALLBACK": "OpenRouter-Tool",
            "RESEARCH_SEARCH_ENGINE": "Exa",
        }
    )
    assert s.search_provider is SearchProvider.SEARXNG
    assert s.searxng_url == "http://searxng.internal:8080"
    assert s.search_fallback is SearchProvider.OPENROUTER_TOOL
    assert s.search_engine == "exa"


@pytest.mark.parametrize(
    ("env", "variable", "says"),
    [
        ({"RESEARCH_SEARCH_PROVIDER": "bing"}, "RESEARCH_SEARCH_PROVIDER", "'bing' is not a search provider"),
        (
            {"RESEARCH_SEARCH_FALLBACK": "google"},
            "RESEARCH_SEARCH_FALLBACK",
            "'google' is not a search provider",
        ),
        ({"RESEARCH_SEARCH_ENGINE": "google"}, "RESEARCH_SEARCH_ENGINE", "'google' is not a search engine"),
        ({"SEARXNG_URL": "searxng.internal"}, "SEARXNG_URL", "is not an http(s) URL"),
        ({"RESEARCH_SEARCH_PROVIDER": "searxng"}, "RESEARCH_SEARCH_PROVIDER", "searxng needs SEARXNG_URL"),
        ({"RESEARCH_SEARCH_FALLBACK": "searxng"}, "RESEARCH_SEARCH_FALLBACK", "searxng needs SEARXNG_URL"),
        (
            {"RESEARCH_SEARCH_FALLBACK": "openrouter-plugin"},
            "RESEARCH_SEARCH_FALLBACK",
            "'openrouter-plugin' is already the primary provider",
        ),
        (
            {
                "RESEARCH_SEARCH_PROVIDER": "searxng",
                "SEARXNG_URL": "http://s:8080",
                "RESEARCH_SEARCH_FALLBACK": "searxng",
            },
            "RESEARCH_SEARCH_FALLBACK",
            "'searxng' is already the primary provider",
        ),
    ],
)
def test_an_unusable_search_setting_stops_start_up_naming_the_variable(
    env: dict[str, str], variable: str, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(env)
    message = str(caught.value)
    assert message.startswith(f"{variable}: ")
    assert says in message
    assert "\n" not in message


def test_the_worker_refuses_to_start_on_searxng_without_its_url() -> None:
    env = {**os.environ, "RESEARCH_SEARCH_PROVIDER": "searxng"}
    env.pop("SEARXNG_URL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "worker.cli", "run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "research-worker: configuration error: RESEARCH_SEARCH_PROVIDER: searxng needs SEARXNG_URL, "
        "the address of the SearXNG instance"
    ]
