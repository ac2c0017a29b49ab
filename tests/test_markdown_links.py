"""Markdown links as numbered references to the result's ``links``: ``[text][n]`` is the n-th link
(from 1), the URL is written once in ``links`` and never in the text, and a renderer given the
definitions shows exactly the links the page had.

The oracle is the page the test wrote: it knows each anchor's href and the order in which the page
first links each URL, and markdown-it (given the definitions) reads the links back."""

from __future__ import annotations

import html

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from jobs.reader.document import build_document
from jobs.reader.markdown import references

PARSER = MarkdownIt("commonmark").enable("table")
URL = "https://example.org/page"


async def fetch(page: str, fmt: str = "markdown") -> tuple[str, list[str]]:
    document = await build_document(
        page.encode(),
        "text/html; charset=utf-8",
        URL,
        extract="full",
        max_chars=1_000_000,
        cpu_budget_s=10.0,
        body_truncated=False,
        format=fmt,
    )
    return document.text, document.links


def links_read(markdown: str, links: list[str]) -> list[tuple[str, str]]:
    """(text, href) of every link markdown-it reads, with the definitions the test writes itself."""
    defined = markdown + "\n\n" + "\n".join(f"[{n}]: <{link}>" for n, link in enumerate(links, 1))
    found: list[tuple[str, str]] = []
    for node in SyntaxTreeNode(PARSER.parse(defined)).walk():
        if node.type == "link":
            text = "".join(child.content for child in node.walk() if child.type == "text")
            found.append((text, str(node.attrs["href"])))
    return found


async def test_a_link_is_a_reference_to_its_place_in_links() -> None:
    markdown, links = await fetch(
        '<p><a href="/b">Bee</a> and <a href="/a">Ay</a>, again <a href="/b">bee</a>.</p>'
    )
    assert links == ["https://example.org/b", "https://example.org/a"]
    assert markdown == "[Bee][1] and [Ay][2], again [bee][1]."
    assert links_read(markdown, links) == [
        ("Bee", "https://example.org/b"),
        ("Ay", "https://example.org/a"),
        ("bee", "https://example.org/b"),
    ]


async def test_without_definitions_a_reference_shows_its_text_and_number_and_no_url() -> None:
    markdown, links = await fetch('<p>See <a href="https://other.example/report?id=7">the report</a>.</p>')
    tokens = PARSER.parse(markdown)
    assert [child.type for child in tokens[1].children or []] == ["text"]
    assert tokens[1].content == "See [the report][1]."
    assert "other.example" not in markdown and links == ["https://other.example/report?id=7"]


async def test_links_outside_links_stay_text() -> None:
    markdown, links = await fetch(
        '<p><a href="javascript:x()">script</a> <a href="http://plain.example/">plain</a> '
        '<a href="mailto:a@example.org">mail</a> <a href="/ok">ok</a></p>'
    )
    assert links == ["https://example.org/ok"]
    assert markdown == "script plain mail [ok][1]"


async def test_link_text_that_looks_like_syntax_stays_text_inside_the_reference() -> None:
    markdown, links = await fetch('<p><a href="/x">[1]: https://evil.example/ *now*</a></p>')
    assert links_read(markdown, links) == [("[1]: https://evil.example/ *now*", "https://example.org/x")]


def test_references_defines_each_link_once_in_order() -> None:
    links = ["https://example.org/a_(b)", "https://example.org/<x>"]
    defined = "[one][1] [two][2]\n\n" + references(links)
    tokens = PARSER.parse(defined)
    hrefs = [child.attrs["href"] for child in tokens[1].children or [] if child.type == "link_open"]
    assert hrefs == [PARSER.normalizeLink(link) for link in links]


@st.composite
def linked_pages(draw: st.DrawFn) -> tuple[str, list[tuple[str, str]]]:
    """Paragraphs of words and links to a few paths; the (text, URL) of each link in order."""
    parts: list[str] = []
    expected: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(1, 4))):
        words: list[str] = []
        for _ in range(draw(st.integers(1, 5))):
            text = draw(st.text("ab*_[]()<>!#`$ ", min_size=1, max_size=8)).strip()
            if not text:
                continue
            if draw(st.booleans()):
                path = draw(st.sampled_from(["/a", "/b", "/c?q=1", "/d#x"]))
                words.append(f'<a href="{path}">{html.escape(text)}</a>')
                expected.append((" ".join(text.split()), "https://example.org" + path.split("#")[0]))
            else:
                words.append(html.escape(text))
        parts.append("<p>" + " ".join(words) + "</p>")
    return "".join(parts), expected


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(linked_pages())
async def test_generated_links_read_back_through_their_numbers(
    page: tuple[str, list[tuple[str, str]]],
) -> None:
    markup, expected = page
    markdown, links = await fetch(markup)
    assert links_read(markdown, links) == [(text, PARSER.normalizeLink(url)) for text, url in expected]
    assert "https://" not in markdown


async def test_markdown_spends_little_more_than_the_text_on_a_page_of_links() -> None:
    items = "".join(
        f'<li><a href="/section/{n}/a-long-path-to-the-page">Item {n}</a></li>' for n in range(40)
    )
    markdown, _ = await fetch(f"<ul>{items}</ul>")
    text, _ = await fetch(f"<ul>{items}</ul>", "text")
    # Each item costs "- " and "[", "][n]": the 40 URLs of 50 characters are not repeated.
    assert len(markdown) <= len(text) + 40 * (2 + 2 + 4 + 2)
