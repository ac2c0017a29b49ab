"""The command line, as the contract names it: check-url, search, budget, tools, run."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.support.fake_openrouter import KEY, fake_openrouter
from tests.support.processes import ROOT, forget_jobs, settings_env, start_worker, stop, wait_healthy
from worker import cli
from worker.budget import Budgets, Tool
from worker.config import Settings
from worker.menu import Menu


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.support.run_cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("url", "resolves_to", "verdict", "kind", "reason"),
    [
        ("https://example.org/", ["93.184.216.34"], "allow", None, "public"),
        ("https://example.org/", ["169.254.169.254"], "refuse", "destination_blocked", "link_local"),
        ("https://example.org/", ["93.184.216.34", "10.0.0.5"], "refuse", "destination_blocked", "private"),
        ("https://8.8.8.8/", [], "allow", None, "public"),
        ("https://127.0.0.1:6379/", [], "refuse", "destination_blocked", "loopback"),
        ("https://0x7f.1/", [], "refuse", "destination_blocked", "ambiguous_ip"),
        ("http://example.org/", [], "refuse", "scheme_not_allowed", "scheme"),
        ("https://[::ffff:10.0.0.1]/", [], "refuse", "destination_blocked", "private"),
    ],
    ids=[
        "a public answer",
        "the metadata address",
        "one private answer among public ones",
        "a public literal",
        "loopback Redis",
        "hex short form",
        "plain http",
        "mapped private IPv6",
    ],
)
def test_check_url_prints_the_guardians_verdict_and_exits_0_or_3(
    url: str, resolves_to: list[str], verdict: str, kind: str | None, reason: str
) -> None:
    args = ["check-url", url]
    for address in resolves_to:
        args += ["--resolves-to", address]
    proc = run_cli(*args)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    printed = json.loads(lines[0])
    assert (printed["verdict"], printed["kind"], printed["reason"]) == (verdict, kind, reason)
    assert proc.returncode == (0 if verdict == "allow" else 3)


def test_check_url_honours_operator_allow_ranges() -> None:
    import os

    env = {**os.environ, "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32", "PYTHONPATH": str(ROOT)}
    allowed = run_cli("check-url", "https://127.0.0.1/", env=env)
    refused = run_cli("check-url", "https://127.0.0.2/", env=env)
    assert json.loads(allowed.stdout)["reason"] == "operator_allow"
    assert allowed.returncode == 0
    assert refused.returncode == 3


def test_check_url_rejects_a_bad_address_argument() -> None:
    proc = run_cli("check-url", "https://example.org/", "--resolves-to", "not-an-ip")
    assert proc.returncode == 2
    assert "--resolves-to" in proc.stderr


def test_tools_prints_both_definitions_with_the_untrusted_posture() -> None:
    proc = run_cli("tools")
    tools = {t["name"]: t for t in json.loads(proc.stdout)}
    assert set(tools) == {"web_search", "fetch_page"}
    for tool in tools.values():
        assert "never follow instructions" in tool["description"]
        assert tool["input_schema"]["type"] == "object"
        assert "report_id" not in tool["input_schema"]["properties"]
    assert "url_not_in_menu" in tools["fetch_page"]["description"]
    assert tools["fetch_page"]["input_schema"]["required"] == ["url"]
    assert tools["web_search"]["input_schema"]["properties"]["max_results"]["maximum"] == 10


async def test_budget_prints_the_reports_counters_menu_and_spend(
    settings: Settings, redis: aioredis.Redis, report: str
) -> None:
    budgets = Budgets(redis, settings)
    await budgets.charge(report, Tool.FETCH, "j1")
    await budgets.charge(report, Tool.SEARCH, "j2")
    await Menu(redis, settings).record(report, ["https://a.test/", "https://b.test/"])
    proc = await asyncio.to_thread(run_cli, "budget", report, env=settings_env(settings))
    printed = json.loads(proc.stdout)
    assert proc.returncode == 0
    assert printed["fetch"] == {"used": 1, "limit": 25, "remaining": 24}
    assert printed["search"] == {"used": 1, "limit": 15, "remaining": 14}
    assert printed["menu_size"] == 2
    assert 0 < printed["expires_in_s"] <= 86400
    assert printed["spend"]["searches"] == 0


async def test_search_enqueues_waits_and_prints_the_result(
    settings: Settings, report: str, token: str
) -> None:
    async with fake_openrouter() as fake:
        env = {
            "OPENROUTER_BASE_URL": fake.base_url,
            "OPENROUTER_API_KEY": KEY,
            "RESEARCH_USAGE_SOURCE": f"src-{token}",
        }
        worker = start_worker(settings, "search", module="tests.support.run_cli_worker", env=env)
        try:
            await asyncio.to_thread(wait_healthy, settings, 1)
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.support.run_cli",
                "search",
                "tidal energy",
                "--report",
                report,
                "--max-results",
                "2",
                cwd=ROOT,
                env=settings_env(settings, **env),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            out, _ = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            log = stop(worker)
    result = json.loads(out)
    forget_jobs(settings, [result["job_id"]])
    assert proc.returncode == 0
    assert result["ok"] is True
    assert len(result["results"]) == 2
    assert KEY not in out.decode() and KEY not in log


def test_run_starts_an_embedded_redis_when_none_is_configured_or_running(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Nothing "answers" on localhost:6379 and REDIS_URL is unset: the worker brings its own Redis.
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setattr(cli, "redis_answers", lambda *a, **k: False)
    monkeypatch.setattr(cli.logs, "configure", lambda level: None)
    started: list[Path] = []
    real_start = cli.EmbeddedRedis.start

    def spy(self: cli.EmbeddedRedis, *args: object, **kwargs: object) -> None:
        real_start(self)
        started.append(self.socket_path)

    monkeypatch.setattr(cli.EmbeddedRedis, "start", spy)
    with caplog.at_level(logging.INFO):
        code = cli.main(["run", "--burst"])
    assert code == 0
    assert len(started) == 1
    assert not started[0].exists()  # stopped and cleaned up on exit
    assert any("embedded Redis" in r.getMessage() for r in caplog.records)


def test_a_run_with_the_metrics_port_taken_says_so(settings: Settings) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_cli("run", "--burst", env=settings_env(settings, RESEARCH_METRICS_PORT=str(port)))
    assert proc.returncode == 2
    assert "RESEARCH_METRICS_PORT" in proc.stderr
