"""The dashboard in a real headless Chromium (Debian's package), driven over the DevTools protocol.

The browser loads ``/`` and a job page from a seeded Redis; the test reads every request the page
made and every console message, and saves full-page screenshots under artifacts/ (git-ignored)
for a person to look at.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import itertools
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import redis.asyncio as aioredis

from tests.support.processes import ROOT
from tests.support.redis_process import free_port
from tests.test_dashboard import HOSTILE_QUERY, HOSTILE_URL, Seeded, fetch_error, record, seed, serving
from worker.config import Secret, Settings
from worker.state import activity, keys

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "artifacts"
# Everything that would make the browser talk to anything but our loopback page is off, and any
# name it might still look up resolves nowhere.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)
WIDTH = 1400

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
    ),
]


@dataclasses.dataclass
class Visit:
    """What one page load did: every request the page made, every console or log error, its DOM."""

    requests: list[str]
    errors: list[str]
    dom: str


class DevTools:
    """A page target of a running Chromium, spoken to over its DevTools websocket."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self._socket = socket
        self._ids = itertools.count(1)
        self._events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self._socket:
            data = message.json()
            if "id" in data:
                self._replies.pop(data["id"]).set_result(data)
            else:
                self._events.put_nowait(data)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self._ids)
        reply = self._replies[number] = asyncio.get_running_loop().create_future()
        await self._socket.send_json({"id": number, "method": method, "params": params})
        data = await asyncio.wait_for(reply, 30)
        assert "error" not in data, data
        return dict(data.get("result", {}))

    async def visit(self, url: str) -> Visit:
        while not self._events.empty():
            self._events.get_nowait()
        await self.send("Page.navigate", url=url)
        requests: list[str] = []
        errors: list[str] = []
        while True:
            event = await asyncio.wait_for(self._events.get(), 30)
            method, params = event["method"], event.get("params", {})
            if method == "Network.requestWillBeSent":
                requests.append(params["request"]["url"])
            elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "warning", "assert"):
                errors.append(str(params["args"]))
            elif method == "Runtime.exceptionThrown":
                errors.append(str(params["exceptionDetails"]))
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                errors.append(params["entry"]["text"])
            elif method == "Page.loadEventFired":
                break
        await asyncio.sleep(0.3)  # late subresources (the favicon) and their console messages
        while not self._events.empty():
            event = self._events.get_nowait()
            if event["method"] == "Network.requestWillBeSent":
                requests.append(event["params"]["request"]["url"])
            elif event["method"] == "Log.entryAdded" and event["params"]["entry"]["level"] == "error":
                errors.append(event["params"]["entry"]["text"])
        document = await self.send("DOM.getDocument", depth=-1)
        dom = await self.send("DOM.getOuterHTML", nodeId=document["root"]["nodeId"])
        return Visit(requests, errors, str(dom["outerHTML"]))

    async def screenshot(self, path: Path) -> None:
        metrics = await self.send("Page.getLayoutMetrics")
        height = int(metrics["cssContentSize"]["height"])
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=WIDTH,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        await self.send(
            "Emulation.setDeviceMetricsOverride", width=WIDTH, height=1000, deviceScaleFactor=1, mobile=False
        )

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@contextlib.asynccontextmanager
async def chromium(profile: Path) -> AsyncIterator[DevTools]:
    proc = await asyncio.create_subprocess_exec(
        str(CHROMIUM),
        *FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},1000",
        "about:blank",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            assert proc.returncode is None, "chromium exited"
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
                targets = await response.json()
            [page] = [target for target in targets if target["type"] == "page"]
            async with session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as socket:
                tools = DevTools(socket)
                try:
                    for domain in ("Page", "Network", "Runtime", "Log", "DOM"):
                        await tools.send(f"{domain}.enable")
                    yield tools
                finally:
                    await tools.close()
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def an_hour_of_jobs(redis: aioredis.Redis, settings: Settings, token: str) -> None:
    """Jobs spread over the last hour, with a queue that swells and drains, as a busy hour looks."""
    rng = random.Random(14)
    now = time.time()
    kinds = ["ok"] * 12 + ["http_status", "timeout", "destination_blocked", "budget_exhausted"]
    for minute in range(60):
        backlog = int(20 + 18 * abs(30 - minute) / 30 * rng.random())
        await redis.zadd(settings.queue_name, {f"{token}-backlog-{i}": 1 for i in range(backlog)})
        await redis.zremrangebyrank(settings.queue_name, backlog, -1)
        for index in range(rng.randint(2, 9)):
            kind = rng.choice(kinds)
            tool = rng.choice(["fetch_page", "web_search"])
            job = f"{token}-h{minute}-{index}"
            if kind == "ok":
                done: dict[str, Any] = {"ok": True, "tool": tool, "report_id": f"r-{token}", "job_id": job}
                done |= {"url": f"https://example.org/{job}"} if tool == "fetch_page" else {"query": "tides"}
            else:
                done = fetch_error(job, f"r-{token}", f"https://example.org/{job}", kind, f"{kind} (seeded)")
            wait = rng.lognormvariate(1.0 + (minute % 20) / 10, 0.6)
            at = now - (59 - minute) * 60 - rng.random() * 50
            await record(
                redis,
                settings,
                done,
                duration_ms=rng.lognormvariate(5, 0.8),
                run=activity.JobRun("w-1", 1, wait),
                at=at,
            )
    await redis.zremrangebyscore(settings.queue_name, 1, 1)


async def beat_again(redis: aioredis.Redis, settings: Settings, worker_id: str, age_s: float) -> None:
    """A seeded worker's beat, ``age_s`` old, written again now (its key may have lapsed meanwhile)."""
    now = time.time()
    info = {
        "worker_id": worker_id,
        "host": "host-1",
        "pid": 4242,
        "started_at": now - 600,
        "beat_at": now - age_s,
        "jobs_complete": 17,
        "jobs_failed": 2,
        "jobs_retried": 1,
        "jobs_ongoing": 1,
        "max_jobs": 16,
        "queued": 3,
    }
    await redis.set(keys.health(settings.queue_name, worker_id), orjson.dumps(info), px=15_000)


async def seeded_with_history(
    redis: aioredis.Redis, settings: Settings, token: str, tmp_path: Path
) -> Seeded:
    await an_hour_of_jobs(redis, settings, token)
    return await seed(redis, settings, token, tmp_path / "pickle-was-executed")


async def test_the_page_and_a_job_page_render_in_chromium_with_no_errors_and_no_outside_requests(
    settings: Settings, redis: aioredis.Redis, token: str, tmp_path: Path
) -> None:
    s = await seeded_with_history(redis, settings, token, tmp_path)
    async with serving(settings) as base, chromium(tmp_path / "profile") as browser:
        # The seeded workers beat again now, one fresh and one stale as seeded: a browser that took
        # seconds to start on a busy machine must not have aged them (or let their keys lapse).
        await beat_again(redis, settings, s.live_worker, 1.0)
        await beat_again(redis, settings, s.stale_worker, 12.0)
        front = await browser.visit(f"{base}/")
        await browser.screenshot(ARTIFACTS / "dashboard.png")
        job = await browser.visit(f"{base}/job/{s.failed_job}")
        await browser.screenshot(ARTIFACTS / "dashboard-job.png")
        filtered = await browser.visit(f"{base}/?outcome=destination_blocked")
    for visit in (front, job, filtered):
        assert visit.errors == []
        assert visit.requests, "the page made no request at all"
        outside = [url for url in visit.requests if not url.startswith(f"{base}/")]
        assert outside == []
    assert {url.removeprefix(base) for url in front.requests} == {"/", "/dashboard.css", "/favicon.svg"}
    assert '<dd id="queue-depth">4</dd>' in front.dom
    assert '<dd id="workers-alive">1</dd>' in front.dom
    for shown in (s.live_worker, s.stale_worker, s.running_job, s.waiting_job, s.report, s.org):
        assert shown in front.dom
    assert 'data-series="destination_blocked"' in front.dom
    # The browser parsed the hostile URL and query as text: no element was made from them.
    assert "<img" not in front.dom + job.dom
    assert "alert(2)</script>" not in front.dom
    # (A target carries line-break opportunities, <wbr>, after its slashes and = signs: text aside.)
    assert "&lt;img src=x onerror=alert(1)&gt;" in front.dom.replace("<wbr>", "")
    assert HOSTILE_URL.startswith("https://evil.example/") and HOSTILE_QUERY.startswith("</td>")
    assert 'id="job-message">evil.example resolves to a private address<' in job.dom
    for name in ("dashboard.png", "dashboard-job.png"):
        screenshot = ARTIFACTS / name
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert screenshot.stat().st_size > 20_000


async def test_the_outage_banner_renders_when_redis_cannot_be_read(
    settings: Settings, tmp_path: Path
) -> None:
    nowhere = dataclasses.replace(settings, redis_url=f"redis://127.0.0.1:{free_port()}/0")
    async with serving(nowhere) as base, chromium(tmp_path / "profile") as browser:
        down = await browser.visit(f"{base}/")
        await browser.screenshot(ARTIFACTS / "dashboard-redis-down.png")
    assert 'id="error" role="alert">cannot read Redis at' in down.dom
    # The 503 is the honest answer; the browser reports it, and nothing else.
    assert all("503" in error for error in down.errors)


async def test_the_page_behind_basic_auth_renders_with_credentials_and_not_without(
    settings: Settings, redis: aioredis.Redis, token: str, tmp_path: Path
) -> None:
    s = await seed(redis, settings, token, tmp_path / "pickle-was-executed")
    guarded = dataclasses.replace(settings, dashboard_auth=("ops", Secret("pw")))
    async with serving(guarded) as base, chromium(tmp_path / "profile") as browser:
        await beat_again(redis, settings, s.live_worker, 1.0)
        refused = await browser.visit(f"{base}/")
        await browser.send(
            "Network.setExtraHTTPHeaders",
            headers={"Authorization": "Basic " + base64.b64encode(b"ops:pw").decode()},
        )
        allowed = await browser.visit(f"{base}/")
    assert s.live_worker not in refused.dom
    assert any("status of 401" in error for error in refused.errors)
    assert s.live_worker in allowed.dom
    assert allowed.errors == []
