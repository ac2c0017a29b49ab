"""The dashboard: a read-only page over arq's keys and ours, escaped, authenticated, bounded."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from arq.constants import in_progress_key_prefix, job_key_prefix

from tests.support.processes import ROOT
from worker import keys
from worker.config import Secret, Settings
from worker.dashboard import start
from worker.serialization import dumps

HOSTILE_URL = 'https://evil.example/"><img src=x onerror=alert(1)>'
HOSTILE_QUERY = "</td><script>alert(2)</script>"


@dataclasses.dataclass(frozen=True)
class Seeded:
    """What ``seed`` wrote, so tests can name it."""

    report: str
    hostile_report: str
    org: str
    day: str
    running_job: str
    waiting_job: str
    pickled_job: str
    other_queue_job: str
    live_worker: str
    stale_worker: str


class _Exploit:
    """Unpickling this creates a file: the proof that a pickle would have been executed."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (self.marker,))


async def seed(redis: aioredis.Redis, settings: Settings, token: str, marker: Path) -> Seeded:
    """A queue with running, waiting and deferred jobs, two replicas, results, budgets and spend."""
    now = time.time()
    now_ms = int(now * 1000)
    queue = settings.queue_name
    s = Seeded(
        report=f"r-{token}",
        hostile_report=f"r-{token}<b>bold</b>",
        org=f"org-{token}",
        day=time.strftime("%Y-%m-%d", time.gmtime(now)),
        running_job=f"{token}-running",
        waiting_job=f"{token}-waiting",
        pickled_job=f"{token}-pickled",
        other_queue_job=f"{token}-other-queue",
        live_worker=f"w-{token}-live",
        stale_worker=f"w-{token}-stale",
    )

    def payload(function: str, kwargs: dict[str, Any], enqueued_ms: int) -> bytes:
        return dumps({"t": 1, "f": function, "a": [], "k": kwargs, "et": enqueued_ms})

    running = payload("fetch_page", {"report_id": s.report, "url": HOSTILE_URL}, now_ms - 30_000)
    await redis.set(job_key_prefix + s.running_job, running)
    await redis.zadd(queue, {s.running_job: now_ms - 30_000})
    # Claimed 12 s ago: arq sets the key to live the job timeout + 10 s from the claim.
    claim_ms = int((settings.job_timeout_s + 10) * 1000)
    await redis.set(in_progress_key_prefix + s.running_job, b"1", px=claim_ms - 12_000)
    waiting = payload("web_search", {"report_id": s.report, "query": HOSTILE_QUERY}, now_ms - 5_000)
    await redis.set(job_key_prefix + s.waiting_job, waiting)
    await redis.zadd(queue, {s.waiting_job: now_ms - 5_000})
    exploit = pickle.dumps({"t": 1, "f": "fetch_page", "k": {"report_id": _Exploit(marker)}, "et": now_ms})
    await redis.set(job_key_prefix + s.pickled_job, exploit)
    await redis.zadd(queue, {s.pickled_job: now_ms - 1_000})
    await redis.zadd(queue, {f"{token}-deferred": now_ms + 3_600_000})
    # Claimed by a worker of some other queue: not this queue's business.
    await redis.set(in_progress_key_prefix + s.other_queue_job, b"1", px=60_000)

    for worker_id, beat_age in ((s.live_worker, 1.0), (s.stale_worker, 12.0)):
        info = {
            "worker_id": worker_id,
            "host": "host-1",
            "pid": 4242,
            "started_at": now - 600,
            "beat_at": now - beat_age,
            "jobs_complete": 17,
            "jobs_failed": 2,
            "jobs_retried": 1,
            "jobs_ongoing": 1,
            "max_jobs": 16,
            "queued": 3,
        }
        await redis.set(keys.health(queue, worker_id), dumps(info), px=15_000)

    recent = [
        {"job_id": "j-ok", "tool": "fetch_page", "report_id": s.report, "outcome": "ok"},
        {"job_id": "j-budget", "tool": "web_search", "report_id": s.report, "outcome": "budget_exhausted"},
        {
            "job_id": "j-blocked",
            "tool": "fetch_page",
            "report_id": s.report,
            "outcome": "destination_blocked",
        },
        {"job_id": "j-ok-2", "tool": "fetch_page", "report_id": s.report, "outcome": "ok"},
    ]
    for item in recent:
        line = {**item, "target": HOSTILE_URL[:120], "at": now - 3, "duration_ms": 41.5}
        await redis.rpush(keys.recent(queue), dumps(line))
    await redis.rpush(keys.recent(queue), b"not json at all")

    await redis.hset(keys.budget(s.report), mapping={"search": 3, "fetch": 25, "job:j-ok": "fetch"})
    await redis.expire(keys.budget(s.report), 3_600)
    await redis.sadd(keys.menu(s.report), "https://example.org/a", "https://example.org/b", HOSTILE_URL)
    await redis.expire(keys.menu(s.report), 3_600)
    # Report ids are validated before they reach a key, but the page must not rely on it.
    await redis.hset(keys.budget(s.hostile_report), mapping={"fetch": 1})
    await redis.expire(keys.budget(s.hostile_report), 3_600)

    await redis.hset(
        keys.spend_org_day(s.org, "mcp-research", s.day),
        mapping={"cost_usd": "0.0123", "prompt_tokens": 1200, "completion_tokens": 80, "searches": 4},
    )
    # The writer also names org, source and day inside the hash: those win over the key's text,
    # which cannot be split unambiguously once a source carries a colon.
    await redis.hset(
        keys.spend_org_day(s.org, "mcp:eu", s.day),
        mapping={
            "cost_usd": "0.5",
            "prompt_tokens": 10,
            "completion_tokens": 1,
            "searches": 1,
            "org_id": s.org,
            "usage_source": "mcp:eu",
            "day": s.day,
        },
    )
    await redis.hset(keys.spend_report(s.report), mapping={"cost_usd": "0.0123", "searches": 4})
    # Something else wrote a string under the spend prefix: skipped, not a crash.
    await redis.set(keys.spend_org_day(f"{s.org}-odd", "mcp-research", s.day), b"oops")
    return s


@contextlib.asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[str]:
    """The dashboard in this event loop on a free loopback port; yields its base URL."""
    runner = await start(settings, "127.0.0.1", 0, cache_s=0)
    try:
        port = runner.addresses[0][1]
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def get(url: str, **kwargs: Any) -> tuple[int, dict[str, str], str]:
    async with aiohttp.ClientSession() as session, session.get(url, **kwargs) as response:
        return response.status, dict(response.headers), await response.text()


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "pickle-was-executed"


async def test_the_state_shows_queue_workers_jobs_results_budgets_and_spend(
    settings: Settings, redis: aioredis.Redis, token: str, marker: Path
) -> None:
    s = await seed(redis, settings, token, marker)
    async with serving(settings) as base:
        status, headers, body = await get(f"{base}/api/state")
    assert status == 200
    assert headers["Content-Type"].startswith("application/json")
    state = json.loads(body)

    queue = state["queue"]
    assert queue["name"] == settings.queue_name
    assert queue["depth"] == 4
    assert (queue["due"], queue["deferred"], queue["in_progress"], queue["waiting"]) == (3, 1, 1, 2)
    assert 4.0 <= queue["oldest_waiting_age_s"] < 30.0

    workers = {w["worker_id"]: w for w in state["workers"]}
    assert set(workers) == {s.live_worker, s.stale_worker}
    assert workers[s.live_worker]["stale"] is False
    assert workers[s.stale_worker]["stale"] is True
    live = workers[s.live_worker]
    assert (live["jobs_complete"], live["jobs_failed"], live["jobs_ongoing"], live["max_jobs"]) == (
        17,
        2,
        1,
        16,
    )
    assert 0.5 < live["beat_age_s"] < 5

    [running] = state["in_progress"]
    assert running["job_id"] == s.running_job
    assert (running["tool"], running["report_id"], running["job_try"]) == ("fetch_page", s.report, 1)
    assert running["target"] == HOSTILE_URL
    assert 29 < running["age_s"] < 40
    assert 11 < running["running_s"] < 20

    waiting = {job["job_id"]: job for job in state["waiting"]}
    assert set(waiting) == {s.waiting_job, s.pickled_job}
    assert waiting[s.waiting_job]["target"] == HOSTILE_QUERY

    assert [r["job_id"] for r in state["recent"][:4]] == ["j-ok", "j-budget", "j-blocked", "j-ok-2"]
    assert state["outcomes"]["ok"] == 2
    assert state["outcomes"]["budget_exhausted"] == 1
    assert state["outcomes"]["destination_blocked"] == 1

    budgets = {b["report_id"]: b for b in state["budgets"]}
    mine = budgets[s.report]
    assert (mine["search_used"], mine["search_limit"]) == (3, settings.search_budget)
    assert (mine["fetch_used"], mine["fetch_limit"]) == (25, settings.fetch_budget)
    assert mine["menu_size"] == 3
    assert mine["cost_usd"] == pytest.approx(0.0123)
    assert 3_500 < mine["expires_in_s"] <= 3_600

    spend = [row for row in state["spend"] if row["org"] == s.org]
    # Newest day first, then the costliest.
    assert spend == [
        {
            "day": s.day,
            "org": s.org,
            "usage_source": "mcp:eu",
            "searches": 1,
            "prompt_tokens": 10,
            "completion_tokens": 1,
            "cost_usd": pytest.approx(0.5),
        },
        {
            "day": s.day,
            "org": s.org,
            "usage_source": "mcp-research",
            "searches": 4,
            "prompt_tokens": 1200,
            "completion_tokens": 80,
            "cost_usd": pytest.approx(0.0123),
        },
    ]
    assert state["error"] is None


async def test_a_job_claimed_on_another_queue_is_not_shown_in_progress(
    settings: Settings, redis: aioredis.Redis, token: str, marker: Path
) -> None:
    s = await seed(redis, settings, token, marker)
    async with serving(settings) as base, aiohttp.ClientSession() as session:
        async with session.get(f"{base}/api/state") as response:
            state = await response.json()
    shown = [job["job_id"] for job in state["in_progress"] + state["waiting"]]
    assert s.other_queue_job not in shown
    assert s.running_job in shown


async def test_a_pickled_payload_is_shown_as_unreadable_and_never_loaded(
    settings: Settings, redis: aioredis.Redis, token: str, marker: Path
) -> None:
    s = await seed(redis, settings, token, marker)
    async with serving(settings) as base, aiohttp.ClientSession() as session:
        async with session.get(f"{base}/api/state") as response:
            state = await response.json()
        async with session.get(f"{base}/") as response:
            assert response.status == 200
    [pickled] = [job for job in state["waiting"] if job["job_id"] == s.pickled_job]
    assert pickled["tool"] == "(unreadable payload)"
    assert pickled["report_id"] == ""
    assert not marker.exists()


async def test_the_page_shows_the_seeded_data_with_all_markup_escaped(
    settings: Settings, redis: aioredis.Redis, token: str, marker: Path
) -> None:
    s = await seed(redis, settings, token, marker)
    async with serving(settings) as base:
        status, headers, page = await get(f"{base}/")
    assert status == 200
    assert headers["Content-Type"].startswith("text/html")
    for shown in (settings.queue_name, s.live_worker, s.running_job, s.report, s.org, "budget_exhausted"):
        assert shown in page
    assert '<dd id="queue-depth">4</dd>' in page
    assert '<dd id="workers-alive">1</dd>' in page
    assert "25 / 25" in page
    assert "$0.0123" in page
    # Markup from a URL, a query and a report id arrives as text, never as elements.
    assert "<img" not in page
    assert "<script" not in page
    assert "<b>bold</b>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;/td&gt;&lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert f"r-{token}&lt;b&gt;bold&lt;/b&gt;" in page
    # No URL becomes a link: a click on the dashboard must never open a hostile page.
    assert "<a " not in page
    assert '<meta http-equiv="refresh"' in page


async def test_the_page_never_shows_a_key_or_a_password(
    settings: Settings, redis: aioredis.Redis, token: str, marker: Path
) -> None:
    await seed(redis, settings, token, marker)
    secret_settings = dataclasses.replace(
        settings,
        openrouter_api_key=Secret("sk-or-v1-never-shown"),
        dashboard_auth=("ops", Secret("pw-never-shown")),
    )
    authorization = "Basic " + base64.b64encode(b"ops:pw-never-shown").decode()
    async with serving(secret_settings) as base:
        _, _, page = await get(f"{base}/", headers={"Authorization": authorization})
        _, _, state = await get(f"{base}/api/state", headers={"Authorization": authorization})
    for body in (page, state):
        assert "sk-or-v1-never-shown" not in body
        assert "pw-never-shown" not in body


@pytest.mark.parametrize("path", ["/", "/api/state", "/dashboard.css"])
async def test_basic_auth_is_required_when_configured(settings: Settings, path: str) -> None:
    guarded = dataclasses.replace(settings, dashboard_auth=("ops", Secret("correct horse")))

    def basic(credentials: bytes) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(credentials).decode()}

    async with serving(guarded) as base:
        without, headers, _ = await get(f"{base}{path}")
        wrong_password, _, _ = await get(f"{base}{path}", headers=basic(b"ops:battery staple"))
        wrong_user, _, _ = await get(f"{base}{path}", headers=basic(b"root:correct horse"))
        garbage, _, _ = await get(f"{base}{path}", headers={"Authorization": "Basic !!!"})
        right, _, _ = await get(f"{base}{path}", headers=basic(b"ops:correct horse"))
        health, _, _ = await get(f"{base}/healthz")
    assert (without, wrong_password, wrong_user, garbage) == (401, 401, 401, 401)
    assert headers["WWW-Authenticate"].startswith('Basic realm="research-worker"')
    assert headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert right == 200
    assert health == 200


async def test_every_response_carries_strict_security_headers(settings: Settings) -> None:
    async with serving(settings) as base:
        for path in ("/", "/api/state", "/dashboard.css", "/nowhere"):
            _, headers, _ = await get(f"{base}{path}")
            csp = headers["Content-Security-Policy"]
            assert csp.startswith("default-src 'none';")
            assert "script-src" not in csp
            assert "frame-ancestors 'none'" in csp
            assert headers["X-Frame-Options"] == "DENY"
            assert headers["X-Content-Type-Options"] == "nosniff"
            assert headers["Cache-Control"] == "no-store"
            assert headers["Referrer-Policy"] == "no-referrer"


async def test_the_dashboard_refuses_writes_and_leaves_redis_as_it_found_it(
    settings: Settings, redis: aioredis.Redis, token: str, marker: Path
) -> None:
    await seed(redis, settings, token, marker)

    async def contents() -> dict[bytes, tuple[bytes | None, bool]]:
        found = {}
        async for key in redis.scan_iter(match=f"*{token}*"):
            found[key] = (await redis.dump(key), await redis.pttl(key) > 0)
        return found

    before = await contents()
    async with serving(settings) as base, aiohttp.ClientSession() as session:
        for method in ("POST", "PUT", "DELETE"):
            async with session.request(method, f"{base}/api/state") as response:
                assert response.status == 405
        for _ in range(3):
            async with session.get(f"{base}/") as response:
                assert response.status == 200
    assert await contents() == before


async def test_a_foreign_host_name_is_refused_on_loopback(settings: Settings) -> None:
    # A hostile page can point its own name at 127.0.0.1 and read the dashboard as same-origin.
    async with serving(settings) as base:
        rebound, _, _ = await get(f"{base}/api/state", headers={"Host": "attacker.example"})
        local, _, _ = await get(f"{base}/api/state", headers={"Host": "localhost"})
    assert rebound == 421
    assert local == 200


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_redis_that_does_not_answer_is_reported_on_the_page(settings: Settings) -> None:
    nowhere = dataclasses.replace(settings, redis_url=f"redis://:hunter2@127.0.0.1:{_free_port()}/0")
    async with serving(nowhere) as base:
        status, _, page = await get(f"{base}/")
        _, _, state = await get(f"{base}/api/state")
    assert status == 200
    assert 'id="error"' in page
    assert "cannot read Redis at redis://:***@127.0.0.1" in page
    assert "hunter2" not in page + state


def _cli_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESEARCH_", "REDIS_URL"))}
    return {
        **env,
        "PYTHONPATH": str(ROOT),
        "REDIS_URL": settings.redis_url or "",
        "RESEARCH_QUEUE": settings.queue_name,
        **extra,
    }


def test_the_dashboard_command_serves_and_stops_cleanly_on_sigterm(settings: Settings) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker.cli", "dashboard", "--port", str(port)],
        env=_cli_env(settings),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        state = _wait_for_json(f"http://127.0.0.1:{port}/api/state", proc)
        assert state["queue"]["name"] == settings.queue_name
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def _wait_for_json(url: str, proc: subprocess.Popen[bytes]) -> Any:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the dashboard exited early"
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.load(response)
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer")


def test_a_dashboard_on_a_taken_port_exits_1_with_one_line(settings: Settings) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "worker.cli", "dashboard", "--port", str(port)],
            env=_cli_env(settings),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"research-worker: the dashboard cannot listen on 127.0.0.1:{port}: Address already in use"
    ]


def test_a_malformed_dashboard_auth_stops_start_up_without_echoing_it(settings: Settings) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "worker.cli", "dashboard", "--port", str(_free_port())],
        env=_cli_env(settings, RESEARCH_DASHBOARD_AUTH="ops-without-a-password"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "research-worker: configuration error: RESEARCH_DASHBOARD_AUTH: "
        "must be 'user:password' with both parts non-empty"
    ]
    assert "ops-without-a-password" not in proc.stderr
