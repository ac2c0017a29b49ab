"""An image's alt text in the Markdown wherever the image stands (docs/reader.md): inside running
text, alone in a paragraph, in a figure, as a link, in a list item, a cell, a gallery; written as
an image (``![alt]()``), never in the plain text, never when the image is hidden.

The oracle is the page as built by the test: each generated part says what a reader sees and in
which order, and markdown-it reads the Markdown back.
"""

from __future__ import annotations

import html

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from jobs.reader.document import build_document

PARSER = MarkdownIt("commonmark").enable("table")
URL = "https://example.org/a"
PROSE = "The survey counted more birds on the coast this spring than in any year since records began."
TAIL = "Volunteers walked the same routes each week and noted every bird they saw along the way."


async def read(page: str, *, fmt: str = "markdown", extract: str = "full") -> str:
    document = await build_document(
        page.encode(),
        "text/html; charset=utf-8",
        URL,
        extract=extract,
        max_chars=100_000,
        cpu_budget_s=10.0,
        body_truncated=False,
        format=fmt,
    )
    return document.text


def shown(markdown: str) -> str:
    """The words a reader of the Markdown sees (an image's alt text among them), one space apart."""
    words: list[str] = []
    for token in PARSER.parse(markdown):
        if token.type == "inline":
            for child in token.children or []:
                if child.type == "text":
                    words.extend(child.content.split())
                elif child.type == "image":
                    words.extend(alt_of(child).split())
        elif token.type in ("fence", "code_block"):
            words.extend(token.content.split())
    return " ".join(words)


PLACES = {
    "inline": "<p>Before {alt_img} after.</p>",
    "alone": "<p>{alt_img}</p>",
    "figure": "<figure>{alt_img}<figcaption>A caption.</figcaption></figure>",
    "linked": '<div><a href="/photo">{alt_img}</a></div>',
    "item": "<ul><li>{alt_img}</li><li>Second item.</li></ul>",
    "cell": "<table><tr><th>Picture</th><th>Name</th></tr><tr><td>{alt_img}</td><td>Gull</td></tr></table>",
    "gallery": "<div>{alt_img}{alt_img2}</div>",
    "div": "<div>{alt_img}</div><div>Text after.</div>",
}


def place(kind: str, alt: str, alt2: str = "second view") -> str:
    image = f'<img src="/a.jpg" alt="{html.escape(alt)}">'
    second = f'<img src="/b.jpg" alt="{html.escape(alt2)}">'
    return PLACES[kind].format(alt_img=image, alt_img2=second)


async def test_alt_text_is_shown_wherever_the_image_stands() -> None:
    for kind in PLACES:
        page = f"<p>{PROSE}</p>{place(kind, 'A gull on a post')}<p>{TAIL}</p>"
        markdown = await read(page)
        words = shown(markdown)
        assert "A gull on a post" in words, (kind, markdown)
        assert words.index(PROSE[:20]) < words.index("A gull on a post") < words.index(TAIL[:20]), kind
        if kind == "gallery":
            assert words.index("A gull on a post") < words.index("second view")


def alt_of(image: Token) -> str:
    """The alt text a renderer writes: the text of the image's children (markup fails)."""
    assert all(grand.type == "text" for grand in image.children or []), "markup in the alt text"
    return "".join(grand.content for grand in image.children or [])


def images(markdown: str) -> list[str]:
    """The alt texts of the images markdown-it reads, with no source."""
    found: list[str] = []
    for token in PARSER.parse(markdown):
        for child in token.children or []:
            if child.type == "image":
                assert child.attrs["src"] == ""
                found.append(alt_of(child))
    return found


async def test_alt_text_is_written_as_an_image_without_a_source() -> None:
    for kind in PLACES:
        markdown = await read(f"<p>{PROSE}</p>{place(kind, 'A gull on a post')}<p>{TAIL}</p>")
        expected = ["A gull on a post", "second view"] if kind == "gallery" else ["A gull on a post"]
        assert images(markdown) == expected, (kind, markdown)
        assert "/a.jpg" not in markdown


async def test_the_plain_text_never_carries_alt_text() -> None:
    for kind in PLACES:
        page = f"<p>{PROSE}</p>{place(kind, 'A gull on a post')}<p>{TAIL}</p>"
        text = await read(page, fmt="text")
        assert "gull on a post" not in text, kind
        assert "\n\n" not in text and not text.startswith("\n") and not text.endswith("\n"), kind


async def test_a_hidden_image_shows_no_alt_text() -> None:
    for hidden in (
        '<img hidden alt="X1">',
        '<div hidden><img alt="X1"></div>',
        '<img style="display:none" alt="X1">',
    ):
        markdown = await read(f"<p>{PROSE}</p><p>{hidden}</p><p>{TAIL}</p>")
        assert "X1" not in markdown, hidden


async def test_alt_text_is_escaped_like_any_text() -> None:
    markdown = await read('<p><img alt="# SYSTEM [click](javascript:x) *now*"></p>')
    tokens = PARSER.parse(markdown)
    assert [token.type for token in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    assert [child.type for child in tokens[1].children or []] == ["image"]
    assert images(markdown) == ["# SYSTEM [click](javascript:x) *now*"]


async def test_main_mode_keeps_the_articles_pictures_and_drops_the_pages_furniture() -> None:
    page = (
        '<nav><a href="/"><img alt="Site logo"></a> <a href="/news">News</a></nav>'
        f"<article><h1>Birds return</h1><p>{PROSE}</p><p><img alt='A flock over the bay'></p>"
        f"<figure><img alt='A heron'><figcaption>Photo: staff</figcaption></figure><p>{TAIL}</p></article>"
        "<footer><img alt='Footer badge'> Example News</footer>"
    )
    markdown = await read(page, extract="main")
    words = shown(markdown)
    assert "A flock over the bay" in words and "A heron" in words
    assert "Site logo" not in words and "Footer badge" not in words
    assert words.index("A flock over the bay") < words.index("A heron") < words.index(TAIL[:20])


@st.composite
def pages(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Paragraphs and images in generated places; the texts a reader sees, in order."""
    parts: list[str] = []
    expected: list[str] = []
    for number in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["text", *PLACES]))
        if kind == "text":
            words = f"paragraph {number} " + " ".join(
                draw(st.lists(st.sampled_from(["a", "b", "c"]), max_size=4))
            )
            parts.append(f"<p>{words}</p>")
            expected.append(" ".join(words.split()))
        else:
            alt = f"picture {number} " + draw(
                st.sampled_from(["of a gull", "& a tern", "<b>x</b>", "*star*"])
            )
            parts.append(place(kind, alt, f"view {number}"))
            expected.append(" ".join(alt.split()))
            if kind == "gallery":
                expected.append(f"view {number}")
    return "".join(parts), expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pages())
async def test_generated_pages_show_every_alt_text_in_page_order(page: tuple[str, list[str]]) -> None:
    markup, expected = page
    words = shown(await read(markup))
    at = 0
    for text in expected:
        found = words.find(text, at)
        assert found >= 0, (text, words)
        at = found + len(text)
