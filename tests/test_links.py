"""Links as the URL menu stores them, resolved by the guardian's own parser: a link that cannot be
read is dropped and counted, and never costs the page."""

from __future__ import annotations

import asyncio
import html
import json
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.reader.document import Document, build_document
from jobs.reader.links import LinkResolver
from worker.guardian.urls import canonical_url

PAGE = "https://example.org/dir/page"
# Characters that NFKC turns into URL delimiters: a host spelled with them is a different host (or
# no host) to a parser that normalizes, and Python's urlsplit refuses them outright.
NORMALIZE_TO_DELIMITERS = sorted(
    chr(code)
    for code in range(0xA0, 0x10000)
    if not 0xD800 <= code <= 0xDFFF and set(unicodedata.normalize("NFKC", chr(code))) & set("/?#@:")
)
HOSTILE_HOSTS = [
    "[ccpa-preferences]",
    "[",
    "]",
    "[::1",
    "::1]",
    "[v1.x]",
    "[1:2:3:4:5:6:7:8:9]",
    "[::ffff:1.2.3.4]",
    "[example.org]",
    "exa]mple.org",
    "a[b]c",
    "%",
    "%zz",
    "%2F",
    "",
    "example.org:99999999999999999999",
    "example.org:-1",
    "example.org:1:2",
    "example.org:port",
    "user@example.org",
    "xn--",
    "xn--b",
    "\u0000",
]
HOST = st.one_of(
    st.sampled_from(HOSTILE_HOSTS),
    st.builds(
        lambda left, char, right: left + char + right,
        st.sampled_from(["", "ex", "example.org"]),
        st.sampled_from(NORMALIZE_TO_DELIMITERS),
        st.sampled_from(["", ".org", "evil.example"]),
    ),
    st.text(max_size=12),
)
PREFIX = st.sampled_from(["https://", "//", "http://", "HTTPS://", "https:", "https:///", "https:\\\\", ""])
TAIL = st.sampled_from(["", "/", "/path", "/a b", "?q=1", "#frag", "/../..", "/%zz", ":443/x"])
HREF = st.one_of(st.builds(lambda p, h, t: p + h + t, PREFIX, HOST, TAIL), st.text(max_size=30))


def build(body: bytes, content_type: str = "text/html") -> Document:
    return asyncio.run(
        build_document(
            body, content_type, PAGE, extract="full", max_chars=40_000, cpu_budget_s=3.0, body_truncated=False
        )
    )


def assert_menu_ready(links: list[str]) -> None:
    assert len(links) == len(set(links)) <= 500
    for link in links:
        assert canonical_url(link) == link


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(HREF, max_size=12), st.one_of(st.none(), HREF))
def test_no_href_or_base_href_crashes_a_page_and_every_link_is_menu_ready(
    hrefs: list[str], base: str | None
) -> None:
    base_tag = "" if base is None else f'<base href="{html.escape(base)}">'
    anchors = "".join(f'<a href="{html.escape(href)}">x</a>' for href in hrefs)
    document = build(
        f"{base_tag}<p>kept</p>{anchors}<a href='/good'>good</a>".encode("utf-8", "surrogatepass")
    )
    assert document.text.startswith("kept")
    assert_menu_ready(document.links)
    if base is None:
        assert "https://example.org/good" in document.links


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(HREF, max_size=12))
def test_no_url_spelled_out_in_a_json_or_text_body_crashes_it(urls: list[str]) -> None:
    body = json.dumps({"links": urls, "next": "https://example.org/next"}).encode()
    for content_type in ("application/json", "text/plain", "application/rss+xml"):
        document = build(body, content_type)
        assert_menu_ready(document.links)
        assert "https://example.org/next" in document.links


@pytest.mark.parametrize("host", [*HOSTILE_HOSTS[:10], "\uff0f.example", "a\uff20b.example", "x\uff1a1"])
def test_a_link_the_parser_cannot_read_is_dropped_and_counted_and_the_rest_of_the_page_stays(
    host: str,
) -> None:
    resolver = LinkResolver(None, PAGE)
    resolver.add([f"https://{host}/x", "/kept"])
    assert resolver.links[-1] == "https://example.org/kept"
    assert_menu_ready(resolver.links)


def test_a_real_pages_bracketed_placeholder_host_is_counted_as_unresolved() -> None:
    document = build(b'<p>text</p><a href="//[ccpa-preferences]/opt-out">x</a><a href="/next">next</a>')
    assert (document.text, document.links, document.unresolved_links) == (
        "text\nxnext",
        ["https://example.org/next"],
        1,
    )


def test_a_base_href_the_parser_cannot_read_is_ignored_and_counted() -> None:
    document = build(b'<base href="https://[oops/"><a href="next">next</a>')
    assert (document.links, document.unresolved_links) == (["https://example.org/dir/next"], 1)


def test_links_that_are_only_not_fetchable_are_not_counted_as_unresolved() -> None:
    document = build(
        b'<a href="http://example.org/">a</a><a href="mailto:x@example.org">b</a><a href="#top">c</a>'
    )
    assert (document.links, document.unresolved_links) == ([], 0)


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("c?q=1", "https://example.org/dir/c?q=1"),
        ("../up", "https://example.org/up"),
        ("?only=query", "https://example.org/dir/page?only=query"),
        ("//cdn.example.net/x", "https://cdn.example.net/x"),
        ("/caf\u00e9", "https://example.org/caf%C3%A9"),
        ("https://B\u00dcCHER.example/", "https://xn--bcher-kva.example/"),
        ("HTTPS://EXAMPLE.ORG:443/b#frag", "https://example.org/b"),
    ],
)
def test_links_resolve_as_a_browser_resolves_them(href: str, expected: str) -> None:
    resolver = LinkResolver(None, PAGE)
    resolver.add([href])
    assert resolver.links == [expected]
