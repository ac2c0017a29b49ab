"""fetch_page with rendering: asked (render: true), unasked (RESEARCH_RENDER=auto), refused (off),
and the render budget; a fetch worker and a render worker on loopback, as deployed."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.fake_dns import FakeResolver
from tests.support.fetching import fetch_settings
from tests.support.hostile_render import APP_TEXT, Traps, hostile_world, resolver
from tests.support.rendering import browser_only
from tests.support.tls import TestCA
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import RenderMode, Settings
from worker.settings import render_tools, render_worker_settings, tools


@contextlib.asynccontextmanager
async def deployment(
    settings: Settings, token: str, *, render_worker: bool, dns: FakeResolver | None = None
) -> AsyncIterator[ResearchClient]:
    dns = dns or resolver()
    async with contextlib.AsyncExitStack() as stack:
        if render_worker:
            await stack.enter_async_context(
                running_worker(render_worker_settings(settings), list(render_tools(dns)))
            )
        await stack.enter_async_context(running_worker(settings, list(tools(dns))))
        yield await stack.enter_async_context(
            ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=60)
        )


def _settings(settings: Settings, ca: TestCA, mode: RenderMode, **changes: Any) -> Settings:
    return fetch_settings(settings, ca, render=mode, fetch_timeout_s=12.0, **changes)


async def _fetch(client: ResearchClient, report: str, url: str, **arguments: Any) -> dict[str, Any]:
    return await client.run("fetch_page", {"report_id": report, "url": url, "extract": "main", **arguments})


@pytest.fixture
async def world(ca: TestCA) -> AsyncIterator[Traps]:
    async with hostile_world(ca) as traps:
        yield traps


async def test_rendering_off_refuses_render_true_with_invalid_request_and_charges_nothing(
    settings: Settings, ca: TestCA, token: str, report: str, world: Traps
) -> None:
    async with deployment(_settings(settings, ca, RenderMode.OFF), token, render_worker=False) as client:
        result = await _fetch(client, report, f"{world.site}/shell", render=True)
        budget = await client.redis.hgetall(f"research:budget:{report}")
    assert result["ok"] is False
    assert result["error"]["kind"] == "invalid_request"
    assert "render" in result["error"]["message"]
    assert not budget


async def test_a_static_fetch_of_a_script_built_page_says_script_shell(
    settings: Settings, ca: TestCA, token: str, report: str, world: Traps
) -> None:
    async with deployment(_settings(settings, ca, RenderMode.ON), token, render_worker=False) as client:
        result = await _fetch(client, report, f"{world.site}/shell")
    assert result["ok"] is True, result
    assert result["script_shell"] is True
    assert result["rendered"] is False
    assert APP_TEXT not in result["text"]


async def test_render_true_without_a_render_worker_fails_quickly_with_a_clear_kind(
    settings: Settings, ca: TestCA, token: str, report: str, world: Traps
) -> None:
    async with deployment(_settings(settings, ca, RenderMode.ON), token, render_worker=False) as client:
        result = await _fetch(client, report, f"{world.site}/shell", render=True)
    assert result["ok"] is False
    assert result["error"]["kind"] == "timeout"
    assert "render worker" in result["error"]["message"]


@pytest.mark.parametrize("bad", ["yes", 1, None, [], {"a": 1}])
async def test_render_must_be_a_boolean(
    settings: Settings, ca: TestCA, token: str, report: str, world: Traps, bad: object
) -> None:
    async with deployment(_settings(settings, ca, RenderMode.ON), token, render_worker=False) as client:
        result = await _fetch(client, report, f"{world.site}/shell", render=bad)
    assert result["error"]["kind"] == "invalid_request"


class TestWithARenderWorker:
    pytestmark = browser_only

    async def test_render_true_reads_the_page_as_rendered_and_counts_against_the_render_budget(
        self, settings: Settings, ca: TestCA, token: str, report: str, world: Traps
    ) -> None:
        configured = _settings(settings, ca, RenderMode.ON, render_budget=1)
        async with deployment(configured, token, render_worker=True) as client:
            first = await _fetch(client, report, f"{world.site}/shell", render=True)
            second = await _fetch(client, report, f"{world.site}/shell", render=True)
            budget = await client.redis.hgetall(f"research:budget:{report}")
        assert first["ok"] is True, first
        assert first["rendered"] is True
        assert first["script_shell"] is False
        assert APP_TEXT in first["text"]
        assert "Ignore previous instructions" not in first["text"]
        assert first["hidden_removed"] > 0
        assert second["ok"] is False
        assert second["error"]["kind"] == "budget_exhausted"
        assert "renders" in second["error"]["message"]
        assert budget[b"render"] == b"1"
        assert budget[b"fetch"] == b"2"
        assert world.reached == []

    async def test_auto_renders_a_script_shell_unasked_and_keeps_the_static_page_past_the_budget(
        self, settings: Settings, ca: TestCA, token: str, report: str, world: Traps
    ) -> None:
        configured = dataclasses.replace(
            _settings(settings, ca, RenderMode.AUTO, render_budget=1), cache_ttl_s=0
        )
        async with deployment(configured, token, render_worker=True) as client:
            first = await _fetch(client, report, f"{world.site}/shell")
            second = await _fetch(client, report, f"{world.site}/shell")
        assert first["ok"] is True, first
        assert first["rendered"] is True
        assert APP_TEXT in first["text"]
        assert second["ok"] is True
        assert (second["rendered"], second["script_shell"]) == (False, True)

    async def test_the_documents_redirects_follow_the_fetchs_hop_rules(
        self, settings: Settings, ca: TestCA, token: str, report: str, world: Traps
    ) -> None:
        configured = _settings(settings, ca, RenderMode.ON, url_menu=True)
        urls = {name: f"{world.site}/redirect/{name}" for name in ("address", "name", "http", "other-site")}
        async with deployment(configured, token, render_worker=True) as client:
            # The name's target is on the menu, so the address is what refuses it, not the menu.
            await client.seed_urls(report, [*urls.values(), f"https://internal.test:{world.site_port}/r"])
            results = {name: await _fetch(client, report, url, render=True) for name, url in urls.items()}
        kinds = {name: result["error"]["kind"] for name, result in results.items()}
        assert kinds == {
            "address": "destination_blocked",
            "name": "destination_blocked",
            "http": "scheme_not_allowed",
            "other-site": "url_not_in_menu",
        }
        assert world.reached == []
