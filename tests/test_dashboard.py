"""The dashboard: a read-only page over arq's keys and ours, escaped, authenticated, bounded, honest
about Redis. Job detail, filters, charts and the workers' records have their own test files; the
seeding and serving helpers here are shared by them."""

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
from collections.abc import AsyncIterator, Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import aiohttp
import html5lib
import pytest
import redis.asyncio as aioredis
from arq.constants import in_progress_key_prefix, job_key_prefix, retry_key_prefix

from tests.support.processes import ROOT
from tests.support.redis_process import RedisProcess
from worker.config import Secret, Settings
from worker.dashboard import start
from worker.serialization import dumps
from worker.state import activity, keys

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
    failed_job: str


class _Exploit:
    """Unpickling this creates a file: the proof that a pickle would have been executed."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (self.marker,))


async def record(
    redis: aioredis.Redis,
    settings: Settings,
    result: Mapping[str, Any],
    *,
    duration_ms: float = 41.5,
    run: activity.JobRun | None = None,
    at: float | None = None,
) -> None:
    """Write a finished job's dashboard records exactly as a worker does, in one transaction."""
    outcome = "ok" if result.get("ok") else str(result["error"]["kind"])
    async with redis.pipeline(transaction=True) as tx:
        activity.record(tx, settings.queue_name, result, outcome, duration_ms, run, now=at)
        await tx.execute()


def fetch_error(job_id: str, report: str, url: str, kind: str, message: str) -> dict[str, Any]:
    return {
        "ok": False,
        "tool": "fetch_page",
        "report_id": report,
        "job_id": job_id,
        "url": url,
        "error": {"kind": kind, "message": message},
    }


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
        failed_job=f"{token}-blocked",
    )

    def payload(function: str, kwargs: dict[str, Any], enqueued_ms: int) -> bytes:
        return dumps({"t": None, "f": function, "a": [], "k": kwargs, "et": enqueued_ms})

    running = payload("fetch_page", {"report_id": s.report, "url": HOSTILE_URL}, now_ms - 30_000)
    await redis.set(job_key_prefix + s.running_job, running)
    await redis.zadd(queue, {s.running_job: now_ms - 30_000})
    # Claimed 12 s ago: the in-progress key is the job's lease, naming its holder and claim time.
    # This is its second try: arq counts tries beside the payload, in arq:retry.
    lease = f"{s.live_worker}/nonce@{now_ms - 12_000}".encode()
    await redis.set(in_progress_key_prefix + s.running_job, lease, px=10_000)
    await redis.set(retry_key_prefix + s.running_job, b"2")
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

    # Oldest first, as the workers finished them: the list shows the newest first.
    run = activity.JobRun(s.live_worker, 1, 3.5)
    cached = {"ok": True, "tool": "fetch_page", "report_id": s.report, "job_id": "j-ok-2", "cached": True}
    await record(redis, settings, {**cached, "url": HOSTILE_URL}, run=run, at=now - 4)
    blocked = fetch_error(
        s.failed_job,
        s.report,
        HOSTILE_URL,
        "destination_blocked",
        "evil.example resolves to a private address",
    )
    await record(redis, settings, blocked, run=run, at=now - 3.5)
    await redis.set(keys.result(s.failed_job), dumps(blocked), ex=3_600)
    exhausted = {
        "ok": False,
        "tool": "web_search",
        "report_id": s.report,
        "job_id": "j-budget",
        "query": HOSTILE_QUERY,
        "error": {"kind": "budget_exhausted", "message": "report has used all 15 searches of its budget"},
    }
    await record(redis, settings, exhausted, run=run, at=now - 3.2)
    found = {"ok": True, "tool": "web_search", "report_id": s.report, "job_id": "j-ok", "query": "tides"}
    found |= {"results": [], "provider": "searxng"}
    await record(redis, settings, found, run=run, at=now - 3)
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


LOADED_COLLECT_S = 60.0


@contextlib.asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[str]:
    """The dashboard in this event loop on a free loopback port; yields its base URL. Its reads of
    Redis get a generous deadline: on a loaded machine a snapshot can take longer than the 5 s an
    operator's dashboard allows, and a 503 would be the machine's mood, not the code's."""
    runner = await start(settings, "127.0.0.1", 0, cache_s=0, collect_timeout_s=LOADED_COLLECT_S)
    try:
        port = runner.addresses[0][1]
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def get(url: str, **kwargs: Any) -> tuple[int, dict[str, str], str]:
    async with aiohttp.ClientSession() as session, session.get(url, **kwargs) as response:
        return response.status, dict(response.headers), await response.text()


async def get_json(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.json()


class Parsed(HTMLParser):
    """A page as a browser's parser sees it: its elements with their attributes, and its text."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.texts: list[str] = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.texts.append(data)

    @property
    def text(self) -> str:
        return "".join(self.texts)

    def links(self) -> list[str]:
        return [str(attrs.get("href")) for tag, attrs in self.elements if tag == "a"]

    def by_id(self, element_id: str) -> dict[str, str | None] | None:
        return next((attrs for _, attrs in self.elements if attrs.get("id") == element_id), None)


def text_of(page: str, element_id: str) -> str:
    """The text of the element with this id, as a browser's parser builds it."""
    root = html5lib.parse(page, namespaceHTMLElements=False)
    found = root.find(f".//*[@id='{element_id}']")
    assert found is not None, f"no element with id {element_id!r}"
    return "".join(found.itertext()).strip()


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
    assert (running["tool"], running["report_id"], running["tries"]) == ("fetch_page", s.report, 2)
    assert running["target"] == HOSTILE_URL
    assert 29 < running["age_s"] < 40
    assert 11 < running["running_s"] < 20

    waiting = {job["job_id"]: job for job in state["waiting"]}
    assert set(waiting) == {s.waiting_job, s.pickled_job}
    assert waiting[s.waiting_job]["target"] == HOSTILE_QUERY
    assert waiting[s.waiting_job]["tries"] is None

    recent = state["recent"]
    assert [r["job_id"] for r in recent[:4]] == ["j-ok", "j-budget", s.failed_job, "j-ok-2"]
    blocked = recent[2]
    assert (blocked["outcome"], blocked["target"]) == ("destination_blocked", HOSTILE_URL)
    assert blocked["message"] == "evil.example resolves to a private address"
    assert (blocked["worker_id"], blocked["tries"], blocked["queue_wait_ms"]) == (s.live_worker, 1, 3.5)
    assert recent[0]["provider"] == "searxng"
    assert recent[3]["cached"] is True
    assert state["outcomes"] == {"ok": 2, "budget_exhausted": 1, "destination_blocked": 1, "unknown": 1}

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
    async with serving(settings) as base:
        _, state = await get_json(f"{base}/api/state")
    shown = [job["job_id"] for job in state["in_progress"] + state["waiting"]]
    assert s.other_queue_job not in shown
    assert s.running_job in shown


async def test_a_pickled_payload_is_shown_as_unreadable_and_never_loaded(
    settings: Settings, redis: aioredis.Redis, token: str, marker: Path
) -> None:
    s = await seed(redis, settings, token, marker)
    async with serving(settings) as base:
        _, state = await get_json(f"{base}/api/state")
        page_status, _, _ = await get(f"{base}/")
        job_status, _, job_page = await get(f"{base}/job/{s.pickled_job}")
    [pickled] = [job for job in state["waiting"] if job["job_id"] == s.pickled_job]
    assert pickled["tool"] == "(unreadable payload)"
    assert pickled["report_id"] == ""
    assert (page_status, job_status) == (200, 200)
    assert 'id="job-state">queued<' in job_page
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
    parsed = Parsed(page)
    assert {tag for tag, _ in parsed.elements}.isdisjoint({"img", "script", "b", "iframe"})
    assert HOSTILE_URL in parsed.text
    assert HOSTILE_QUERY in parsed.text
    assert f"r-{token}<b>bold</b>" in parsed.text
    assert '<meta http-equiv="refresh"' in page


async def test_every_link_leads_to_the_dashboard_itself_and_no_target_becomes_a_link(
    settings: Settings, redis: aioredis.Redis, token: str, marker: Path
) -> None:
    # A click on the dashboard must never open a hostile page: URLs from the web are text only.
    s = await seed(redis, settings, token, marker)
    async with serving(settings) as base:
        pages = [(await get(f"{base}{path}"))[2] for path in ("/", f"/job/{s.failed_job}", "/job/nowhere")]
    for page in pages:
        links = Parsed(page).links()
        assert links
        for href in links:
            assert href.startswith("/") and not href.startswith("//"), href
            assert "evil.example" not in href


async def test_the_page_never_shows_a_key_or_a_password(
    settings: Settings, redis: aioredis.Redis, token: str, marker: Path
) -> None:
    s = await seed(redis, settings, token, marker)
    secret_settings = dataclasses.replace(
        settings,
        openrouter_api_key=Secret("sk-or-v1-never-shown"),
        dashboard_auth=("ops", Secret("pw-never-shown")),
    )
    authorization = {"Authorization": "Basic " + base64.b64encode(b"ops:pw-never-shown").decode()}
    async with serving(secret_settings) as base:
        bodies = [
            (await get(f"{base}{path}", headers=authorization))[2]
            for path in ("/", "/api/state", f"/job/{s.failed_job}")
        ]
    for body in bodies:
        assert "sk-or-v1-never-shown" not in body
        assert "pw-never-shown" not in body


def basic(credentials: bytes) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(credentials).decode()}


@pytest.mark.parametrize("path", ["/", "/api/state", "/dashboard.css", "/job/anything", "/favicon.svg"])
async def test_basic_auth_is_required_when_configured(settings: Settings, path: str) -> None:
    guarded = dataclasses.replace(settings, dashboard_auth=("ops", Secret("correct horse")))
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
    assert right in (200, 404)  # an unknown job is a 404 page, once past the door
    assert health == 200


async def test_every_response_carries_strict_security_headers(settings: Settings) -> None:
    async with serving(settings) as base:
        for path in ("/", "/api/state", "/dashboard.css", "/favicon.svg", "/healthz", "/job/x", "/nowhere"):
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
    s = await seed(redis, settings, token, marker)

    async def contents() -> dict[bytes, tuple[bytes | None, bool]]:
        found = {}
        async for key in redis.scan_iter(match=f"*{token}*"):
            found[key] = (await redis.dump(key), await redis.pttl(key) > 0)
        return found

    before = await contents()
    async with serving(settings) as base, aiohttp.ClientSession() as session:
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            for path in ("/api/state", "/", f"/job/{s.failed_job}"):
                async with session.request(method, f"{base}{path}") as response:
                    assert response.status == 405
        for path in ("/", "/api/state", f"/job/{s.failed_job}", f"/job/{s.running_job}", "/?outcome=ok"):
            async with session.get(f"{base}{path}") as response:
                assert response.status == 200
    assert await contents() == before


async def test_a_foreign_host_name_is_refused_on_loopback(settings: Settings) -> None:
    # A hostile page can point its own name at 127.0.0.1 and read the dashboard as same-origin.
    async with serving(settings) as base:
        rebound, _, _ = await get(f"{base}/api/state", headers={"Host": "attacker.example"})
        rebound_job, _, _ = await get(f"{base}/job/x", headers={"Host": "attacker.example"})
        local, _, _ = await get(f"{base}/api/state", headers={"Host": "localhost"})
    assert (rebound, rebound_job) == (421, 421)
    assert local == 200


async def test_a_host_backing_off_is_shown_with_its_time_left(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    seconds, _ = await redis.time()
    until_ms = (int(seconds) + 90) * 1000
    await redis.zadd(keys.host_backoffs(settings.queue_name), {f"slow-{token}.example": until_ms})
    await redis.zadd(keys.host_backoffs(settings.queue_name), {f"done-{token}.example": 1000})
    async with serving(settings) as base:
        _, state = await get_json(f"{base}/api/state")
        _, _, page = await get(f"{base}/")
    [held] = state["backoffs"]
    assert held["host"] == f"slow-{token}.example"
    assert 80 < held["remaining_s"] <= 91
    assert f"slow-{token}.example" in page
    assert f"done-{token}.example" not in page


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_redis_that_does_not_answer_makes_the_state_and_the_page_503_with_the_reason(
    settings: Settings,
) -> None:
    nowhere = dataclasses.replace(settings, redis_url=f"redis://:hunter2@127.0.0.1:{_free_port()}/0")
    async with serving(nowhere) as base:
        page_status, _, page = await get(f"{base}/")
        state_status, state = await get_json(f"{base}/api/state")
        job_status, _, job_page = await get(f"{base}/job/anything")
        health, _, _ = await get(f"{base}/healthz")
    assert (page_status, state_status, job_status) == (503, 503, 503)
    assert state["error"].startswith("cannot read Redis at redis://:***@127.0.0.1")
    banner = Parsed(page).by_id("error")
    assert banner is not None and banner.get("role") == "alert"
    assert "cannot read Redis at redis://:***@127.0.0.1" in page
    # No empty table that would look like a quiet queue.
    assert 'id="unreadable"' in page
    assert 'id="workers"' not in page and 'id="recent"' not in page
    assert "cannot read Redis" in job_page
    assert "hunter2" not in page + json.dumps(state) + job_page
    # The dashboard process itself is fine: its own probe says so.
    assert health == 200


async def test_the_state_turns_503_when_redis_stops_and_200_when_it_is_back(
    settings: Settings, tmp_path: Path
) -> None:
    server = RedisProcess(tmp_path, persistent=False)
    server.start()
    try:
        private = dataclasses.replace(settings, redis_url=server.url)
        async with serving(private) as base:
            up, _ = await get_json(f"{base}/api/state")
            server.stop()
            down, state = await get_json(f"{base}/api/state")
            page_status, _, _ = await get(f"{base}/")
            server.start()
            back, _ = await get_json(f"{base}/api/state")
    finally:
        server.stop()
    assert (up, down, page_status, back) == (200, 503, 503, 200)
    assert state["error"] == f"cannot read Redis at {server.url}: ConnectionError"


async def test_a_malformed_filter_is_a_400_that_names_the_parameter(settings: Settings) -> None:
    async with serving(settings) as base:
        page_status, _, page = await get(f"{base}/", params={"outcome": "<script>"})
        state_status, state = await get_json(f"{base}/api/state?page=0")
        report_status, report = await get_json(f"{base}/api/state?report=a%20b")
        huge_status, _ = await get_json(f"{base}/api/state?page=" + "9" * 5000)
    assert (page_status, state_status, report_status, huge_status) == (400, 400, 400, 400)
    assert "the outcome filter must be an outcome kind" in page
    assert "<script>" not in page
    assert state == {"error": "page must be a whole number from 1 to 10000"}
    assert report["error"].startswith("the report filter must be a report id")


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
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
            assert b"The last hour" in response.read()
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
