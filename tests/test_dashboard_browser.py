"""The dashboard in a real headless Chromium (Debian's package), against a seeded Redis.

The screenshot lands in artifacts/dashboard.png (git-ignored) for a person to look at.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.support.processes import ROOT
from tests.test_dashboard import HOSTILE_URL, seed, serving
from worker.config import Secret, Settings

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "artifacts"
# Everything that would make the browser talk to anything but our loopback page is off.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
    ),
]


async def chromium(profile: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(CHROMIUM),
        *FLAGS,
        f"--user-data-dir={profile}",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=90)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    return out.decode(errors="replace")


async def test_the_page_renders_the_seeded_data_in_chromium(
    settings: Settings, redis: aioredis.Redis, token: str, tmp_path: Path
) -> None:
    s = await seed(redis, settings, token, tmp_path / "pickle-was-executed")
    async with serving(settings) as base:
        dom = await chromium(tmp_path / "profile", "--dump-dom", f"{base}/")
        ARTIFACTS.mkdir(exist_ok=True)
        screenshot = ARTIFACTS / "dashboard.png"
        screenshot.unlink(missing_ok=True)
        await chromium(
            tmp_path / "profile", f"--screenshot={screenshot}", "--window-size=1280,1600", f"{base}/"
        )
    assert '<dd id="queue-depth">4</dd>' in dom
    assert '<dd id="workers-alive">1</dd>' in dom
    for shown in (s.live_worker, s.stale_worker, s.running_job, s.waiting_job, s.report, s.org):
        assert shown in dom
    assert "budget_exhausted" in dom
    assert "destination_blocked" in dom
    # The browser parsed the hostile URL as text: no element was made from it.
    assert "<img" not in dom
    assert "alert(2)</script>" not in dom
    assert "&lt;img src=x onerror=alert(1)&gt;" in dom
    assert HOSTILE_URL.startswith("https://evil.example/")
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert screenshot.stat().st_size > 20_000


async def test_the_page_behind_basic_auth_renders_with_credentials_and_not_without(
    settings: Settings, redis: aioredis.Redis, token: str, tmp_path: Path
) -> None:
    s = await seed(redis, settings, token, tmp_path / "pickle-was-executed")
    guarded = dataclasses.replace(settings, dashboard_auth=("ops", Secret("pw")))
    async with serving(guarded) as base:
        refused = await chromium(tmp_path / "refused", "--dump-dom", f"{base}/")
        host = base.removeprefix("http://")
        allowed = await chromium(tmp_path / "allowed", "--dump-dom", f"http://ops:pw@{host}/")
    assert s.live_worker not in refused
    assert s.live_worker in allowed
