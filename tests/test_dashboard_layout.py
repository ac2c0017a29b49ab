"""What an operator sees first: a banner when jobs wait and no worker is alive, the budgets before
the long tables, and targets that wrap at their slashes."""

from __future__ import annotations

import re
import time

import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st
from markupsafe import Markup

from tests.test_dashboard import Parsed, get, serving
from worker.config import Settings
from worker.dashboard.formatting import breakable
from worker.state import health, keys


async def queue_jobs(redis: aioredis.Redis, settings: Settings, count: int) -> None:
    now_ms = int(time.time() * 1000)
    await redis.zadd(settings.queue_name, {f"waiting-{n}": now_ms for n in range(count)})


@pytest.mark.parametrize("waiting", [1, 3])
async def test_jobs_waiting_with_no_worker_alive_raise_a_banner_that_says_so(
    settings: Settings, redis: aioredis.Redis, waiting: int
) -> None:
    await queue_jobs(redis, settings, waiting)
    async with serving(settings) as base:
        status, _, page = await get(f"{base}/")
    assert status == 200
    banner = Parsed(page).by_id("no-worker")
    assert banner is not None and banner.get("role") == "alert"
    text = " ".join(Parsed(page).text.split())
    assert f"No worker is alive on this queue and {waiting} job" in text
    assert "research-worker run" in text


async def test_no_banner_while_a_worker_beats_or_nothing_waits(
    settings: Settings, redis: aioredis.Redis
) -> None:
    async with serving(settings) as base:
        _, _, empty = await get(f"{base}/")  # no worker, nothing queued: a quiet queue, not an alarm
        await queue_jobs(redis, settings, 2)
        info = {"worker_id": "w", "beat_at": time.time(), "started_at": time.time()}
        await health.publish(redis, settings.queue_name, keys.health(settings.queue_name, "w"), info, 60)
        _, _, beating = await get(f"{base}/")
    assert 'id="no-worker"' not in empty
    assert 'id="no-worker"' not in beating


async def test_the_budgets_come_before_the_long_tables(settings: Settings, redis: aioredis.Redis) -> None:
    async with serving(settings) as base:
        _, _, page = await get(f"{base}/")
    order = [m.group(1) for m in re.finditer(r'<section id="([a-z_-]+)"', page)]
    assert order.index("budgets") < min(
        order.index(name) for name in ("workers", "in_progress", "waiting", "recent")
    )


def test_a_url_breaks_after_each_slash_and_nowhere_inside_a_word() -> None:
    shown = breakable("https://example.org/reports/2026/annual-report.pdf?page=3&lang=en")
    assert isinstance(shown, Markup)
    assert str(shown) == (
        "https://example.<wbr>org/<wbr>reports/<wbr>2026/<wbr>annual-<wbr>report.<wbr>pdf?<wbr>"
        "page=<wbr>3&amp;<wbr>lang=<wbr>en"
    )


@given(st.text(max_size=120))
def test_any_target_is_escaped_with_only_line_breaks_added(text: str) -> None:
    shown = str(breakable(text))
    assert "<" not in shown.replace("<wbr>", "")  # nothing the target holds becomes markup
    assert ">" not in shown.replace("<wbr>", "")
    plain = Parsed(f"<p>{shown}</p>").text
    assert plain == Parsed(f"<p>{Markup.escape(breakable_free(text))}</p>").text


def breakable_free(text: str) -> str:
    """The text as the page shows it without the line breaks (control characters made visible)."""
    from worker.dashboard.formatting import visible

    return str(visible(text))
