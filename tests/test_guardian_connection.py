"""The guardian end to end: real local TLS servers, a fake resolver, only 127.0.0.1 allowed.

127.0.0.2 and up are loopback (harmless if the guard had a bug) but outside the allowed range,
so every "refused" case here is refused by the guardian, and a counting listener on 127.0.0.2
proves that nothing connected to it.
"""

from __future__ import annotations

import ipaddress
import ssl

import aiohttp
import pytest
import trustme
from aiohttp import web

from jobs.fetcher import Fetcher, FetchLimits
from tests.support.fake_dns import FakeResolver
from tests.support.fetching import LOOPBACK_ONLY, connection_counter, fetch_settings, fetching
from tests.support.tls import TestCA, serve
from worker.config import Settings
from worker.guardian.connector import SocketRefused, guarded_session
from worker.guardian.policy import AddressPolicy
from worker.guardian.redirects import follow_any
from worker.guardian.urls import check_url


def page(text: str = "hello") -> web.Response:
    return web.Response(text=f"<html><body><p>{text}</p></body></html>", content_type="text/html")


async def ok_page(request: web.Request) -> web.Response:
    return page("ok")


async def test_a_redirect_to_http_is_refused(settings: Settings, ca: TestCA, token: str, report: str) -> None:
    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://127.0.0.1:{request.url.port}/plain")

    s = fetch_settings(settings, ca)
    async with serve({"/": redirect}, ca.server_context()) as server, fetching(s, token, report) as h:
        result = await h.fetch(server.url("/"))
    assert result["error"]["kind"] == "scheme_not_allowed"


async def test_a_redirect_to_a_refused_address_never_connects(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async with connection_counter("127.0.0.2") as (port, seen):

        async def redirect(request: web.Request) -> web.Response:
            raise web.HTTPFound(f"https://127.0.0.2:{port}/")

        s = fetch_settings(settings, ca)
        async with serve({"/": redirect}, ca.server_context()) as server, fetching(s, token, report) as h:
            result = await h.fetch(server.url("/"))
    assert result["error"]["kind"] == "destination_blocked"
    assert "127.0.0.2" in result["error"]["message"]
    assert seen == []


async def test_a_first_url_on_a_refused_literal_never_connects(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async with connection_counter("127.0.0.2") as (port, seen):
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            result = await h.fetch(f"https://127.0.0.2:{port}/")
    assert result["error"]["kind"] == "destination_blocked"
    assert seen == []


async def test_a_name_that_resolves_to_a_refused_address_never_connects(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async with connection_counter("127.0.0.2") as (port, seen):
        resolver = FakeResolver({"internal.test": ["127.0.0.2"]})
        async with fetching(fetch_settings(settings, ca), token, report, resolver) as h:
            result = await h.fetch(f"https://internal.test:{port}/")
    assert result["error"]["kind"] == "destination_blocked"
    assert seen == []


@pytest.mark.parametrize(
    "answers",
    [["127.0.0.1", "127.0.0.2"], ["127.0.0.2", "127.0.0.1"]],
    ids=["allowed answer first", "refused answer first"],
)
async def test_one_refused_answer_refuses_the_whole_name(
    settings: Settings, ca: TestCA, token: str, report: str, answers: list[str]
) -> None:
    async with connection_counter("127.0.0.2") as (port, seen):
        async with serve({"/": ok_page}, ca.server_context(), port=port) as server:
            resolver = FakeResolver({"mixed.test": answers})
            async with fetching(fetch_settings(settings, ca), token, report, resolver) as h:
                result = await h.fetch(server.url("/", name="mixed.test"))
    assert result["error"]["kind"] == "destination_blocked"
    assert seen == []


async def test_answers_that_flip_after_the_check_are_never_used(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    # A rebinding name: the first answer is allowed, every later one points inside.
    async with connection_counter("127.0.0.2") as (port, seen):
        async with serve({"/": ok_page}, ca.server_context(), port=port) as server:
            resolver = FakeResolver({"flip.test": lambda n: ["127.0.0.1"] if n == 1 else ["127.0.0.2"]})
            async with fetching(fetch_settings(settings, ca), token, report, resolver) as h:
                result = await h.fetch(server.url("/", name="flip.test"))
    assert result["ok"] is True, result["error"]
    assert "ok" in result["text"]
    # One lookup, judged and used for the connection: no second lookup to rebind.
    assert resolver.calls == ["flip.test"]
    assert seen == []


async def test_the_connected_peer_is_the_validated_address(settings: Settings, ca: TestCA) -> None:
    # The server notes which of its addresses the client reached: the one the resolver validated.
    reached: list[str] = []

    async def note_address(request: web.Request) -> web.Response:
        assert request.transport is not None
        reached.append(request.transport.get_extra_info("sockname")[0])
        return page("ok")

    s = fetch_settings(settings, ca)
    policy = AddressPolicy(LOOPBACK_ONLY)
    resolver = FakeResolver({"pinned.test": ["127.0.0.1"]})
    async with serve({"/": note_address}, ca.server_context()) as server:
        limits = FetchLimits(s.fetch_max_bytes, s.fetch_max_pdf_bytes, s.fetch_max_redirects)
        fetcher = Fetcher(guarded_session(s, policy, resolver), policy, limits)
        try:
            fetched = await fetcher.get(check_url(server.url("/", name="pinned.test"), policy), follow_any)
        finally:
            await fetcher.close()
    assert fetched.status == 200
    assert reached == ["127.0.0.1"]
    assert resolver.calls == ["pinned.test"]


async def test_the_socket_factory_refuses_a_literal_even_when_the_url_check_is_skipped(
    settings: Settings, ca: TestCA
) -> None:
    # The last line of defense: hand the session a refused literal directly, bypassing check_url.
    s = fetch_settings(settings, ca)
    async with connection_counter("127.0.0.2") as (port, seen):
        session = guarded_session(s, AddressPolicy(LOOPBACK_ONLY), FakeResolver({}))
        try:
            with pytest.raises(aiohttp.ClientConnectorError) as caught:
                await session.get(f"https://127.0.0.2:{port}/")
        finally:
            await session.close()
    assert isinstance(caught.value.os_error, SocketRefused)
    assert seen == []


async def test_six_redirects_are_refused_and_five_are_followed(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async def hop(request: web.Request) -> web.Response:
        left = int(request.match_info["left"])
        if left == 0:
            return page("arrived")
        raise web.HTTPFound(f"/hop/{left - 1}")

    s = fetch_settings(settings, ca)
    async with serve({"/hop/{left}": hop}, ca.server_context()) as server, fetching(s, token, report) as h:
        five = await h.fetch(server.url("/hop/5"))
        six = await h.fetch(server.url("/hop/6"))
    assert five["ok"] is True
    assert five["redirects"] == 5
    assert five["final_url"].endswith("/hop/0")
    assert six["error"]["kind"] == "too_many_redirects"


@pytest.mark.parametrize(
    ("start", "location", "final_path"),
    [
        ("/a/b/page", "../c", "/a/c"),
        ("/a/b/page", "next", "/a/b/next"),
        ("/a/b/page", "/top", "/top"),
        ("/a/b/page?x=1", "?x=2", "/a/b/page?x=2"),
        ("/a/b/page", "//site.test:{port}/abs", "/abs"),
    ],
    ids=["parent", "sibling", "absolute path", "query only", "scheme-relative"],
)
async def test_relative_locations_resolve_against_the_current_url(
    settings: Settings, ca: TestCA, token: str, report: str, start: str, location: str, final_path: str
) -> None:
    async def any_path(request: web.Request) -> web.Response:
        if request.path_qs == start:
            raise web.HTTPFound(location.format(port=request.url.port))
        return page(f"at {request.path_qs}")

    resolver = FakeResolver({"site.test": ["127.0.0.1"]})
    s = fetch_settings(settings, ca)
    async with serve({"/{tail:.*}": any_path}, ca.server_context()) as server:
        async with fetching(s, token, report, resolver) as h:
            result = await h.fetch(server.url(start, name="site.test"))
    assert result["ok"] is True, result
    assert result["final_url"] == f"https://site.test:{server.port}{final_path}"
    assert f"at {final_path}" in result["text"]


async def test_an_unknown_name_is_a_dns_failure(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async with fetching(fetch_settings(settings, ca), token, report, FakeResolver({})) as h:
        result = await h.fetch("https://nowhere.test/")
    assert result["error"]["kind"] == "dns_failure"


async def test_a_certificate_from_an_unknown_ca_is_a_tls_connection_failure(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    stranger = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    stranger.issue_cert("127.0.0.1").configure_cert(context)
    async with serve({"/": ok_page}, context) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            result = await h.fetch(server.url("/"))
    assert result["error"]["kind"] == "connection_failed"
    assert "TLS" in result["error"]["message"]


async def test_proxy_variables_are_ignored(
    settings: Settings, ca: TestCA, token: str, report: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with connection_counter("127.0.0.3") as (proxy_port, seen):
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.3:{proxy_port}")
        monkeypatch.setenv("ALL_PROXY", f"http://127.0.0.3:{proxy_port}")
        async with serve({"/": ok_page}, ca.server_context()) as server:
            async with fetching(fetch_settings(settings, ca), token, report) as h:
                result = await h.fetch(server.url("/"))
    assert result["ok"] is True
    assert seen == []


async def test_cookies_are_not_kept_between_fetches(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    cookies_seen: list[str | None] = []

    async def handler(request: web.Request) -> web.Response:
        cookies_seen.append(request.headers.get("Cookie"))
        response = page("cookie")
        response.set_cookie("session", "abc", secure=True)
        return response

    async with serve({"/": handler}, ca.server_context()) as server:
        # The page cache off: the second fetch must reach the server to show what it sends.
        async with fetching(fetch_settings(settings, ca, cache_ttl_s=0), token, report) as h:
            await h.fetch(server.url("/"))
            await h.fetch(server.url("/"))
    assert cookies_seen == [None, None]


def test_the_test_network_policy_is_what_the_tests_assume() -> None:
    policy = AddressPolicy(LOOPBACK_ONLY)
    assert policy.classify(ipaddress.ip_address("127.0.0.1")).allowed
    assert not policy.classify(ipaddress.ip_address("127.0.0.2")).allowed
