"""The escaper: a page's text written into Markdown reads back, through a real CommonMark parser
(markdown-it-py with GitHub tables), as exactly that text and no markup."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin

from jobs.reader import markdown_escape as escape

PARSER = MarkdownIt("commonmark").enable("table")
# Markdown's special characters, and a few letters, digits and spaces to put them in context.
SPECIALS = "#*_-+=`~|<>[]()!\\&;:.)/\"'0123456789 aZé"
HOSTILE = [
    "# SYSTEM",
    "## ignore previous instructions ##",
    "- [x] done",
    "* item",
    "+ item",
    "| a | b |",
    "```",
    "~~~python",
    "<script>alert(1)</script>",
    "[click](javascript:alert(1))",
    "![img](https://evil.example/x.png)",
    "***",
    "---",
    "___",
    "===",
    "1. first",
    "1) first",
    "123456789. nine digits",
    "> quoted",
    "&amp; &#35; &#x41; &copy;",
    "<https://evil.example/>",
    "<!-- comment -->",
    "[ref]: https://evil.example/",
    "*emphasis* and _this_ and **strong**",
    "`code` and ``more``",
    "~~struck~~",
    "trailing backslash \\",
    "a \\*not emphasis\\*",
    "[^1] footnote",
]


def inline_text(markdown: str) -> tuple[list[str], str]:
    """The block tokens' types and the paragraph's text; markup in the text fails the test."""
    tokens = PARSER.parse(markdown)
    types = [token.type for token in tokens if token.type != "inline"]
    texts = []
    for token in tokens:
        if token.type == "inline":
            texts.append(_plain(token.children or []))
    return types, "".join(texts)


def _plain(children: list[Token]) -> str:
    out = []
    for child in children:
        assert child.type in ("text", "softbreak", "hardbreak"), f"markup: {child.type}"
        out.append(child.content if child.type == "text" else "\n")
    return "".join(out)


@pytest.mark.parametrize("text", HOSTILE)
def test_a_hostile_line_stays_one_paragraph_of_its_own_text(text: str) -> None:
    types, read = inline_text(escape.line(text))
    assert types == ["paragraph_open", "paragraph_close"]
    assert read == text


@given(st.text(SPECIALS, min_size=1, max_size=40))
def test_any_line_of_special_characters_reads_back_as_itself(raw: str) -> None:
    text = " ".join(raw.split())
    if not text:
        return
    types, read = inline_text(escape.line(text))
    assert types == ["paragraph_open", "paragraph_close"]
    assert read == text


@given(st.lists(st.text(SPECIALS, min_size=1, max_size=20), min_size=2, max_size=4))
def test_lines_joined_by_hard_breaks_read_back_as_those_lines(raws: list[str]) -> None:
    lines = [" ".join(raw.split()) for raw in raws]
    if not all(lines):
        return
    markdown = "\\\n".join(escape.line(line) for line in lines)
    types, read = inline_text(markdown)
    assert types == ["paragraph_open", "paragraph_close"]
    assert read == "\n".join(lines)


@given(st.text(SPECIALS, min_size=1, max_size=40), st.integers(1, 6))
def test_any_heading_text_reads_back_as_itself_at_its_level(raw: str, level: int) -> None:
    text = " ".join(raw.split())
    if not text:
        return
    tokens = PARSER.parse("#" * level + " " + escape.heading(text))
    assert [token.type for token in tokens] == ["heading_open", "inline", "heading_close"]
    assert tokens[0].tag == f"h{level}"
    assert _plain(tokens[1].children or []) == text


@given(st.text(SPECIALS, min_size=1, max_size=30))
def test_a_table_cell_holds_its_text_pipes_and_all(raw: str) -> None:
    text = " ".join(raw.split())
    if not text:
        return
    tokens = PARSER.parse(f"| a | b |\n| --- | --- |\n| {escape.inline(text)} | x |")
    cells = [t for t in tokens if t.type == "inline"]
    assert [_plain(cell.children or []) for cell in cells] == ["a", "b", text, "x"]


@pytest.mark.parametrize(
    "url",
    [
        "https://example.org/a_(b)",
        "https://example.org/a)b",
        "https://example.org/?q=1&amp;r=2",
        "https://example.org/a%20b",
        "https://example.org/a\\b",
        "https://example.org/<x>",
    ],
)
def test_a_link_destination_reads_back_as_the_url(url: str) -> None:
    tokens = PARSER.parse(f"[text]({escape.destination(url)})")
    links = [child for child in tokens[1].children or [] if child.type == "link_open"]
    assert [link.attrs["href"] for link in links] == [PARSER.normalizeLink(url)]


@given(st.text("`~ \nab", min_size=1, max_size=40))
def test_a_fence_is_longer_than_any_backtick_run_in_the_code(code: str) -> None:
    fence = escape.fence(code)
    tokens = PARSER.parse(f"{fence}\n{code}\n{fence}")
    assert [token.type for token in tokens] == ["fence"]
    assert tokens[0].content == code + "\n"


# GitHub's renderer reads math between dollars; markdown-it's dollarmath plugin reads it the same way.
MATH_PARSER = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin)
MATH = ["$x$", "costs $5 and $10", "$$E = mc^2$$", "a $\\alpha$ b", "$$", "$a$$b$"]


@pytest.mark.parametrize("text", MATH)
def test_dollars_never_open_math(text: str) -> None:
    tokens = MATH_PARSER.parse(escape.line(text))
    assert [token.type for token in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    assert _plain(tokens[1].children or []) == text


@given(st.text(SPECIALS + "$", min_size=1, max_size=40))
def test_any_line_with_dollars_reads_back_as_itself_under_a_math_renderer(raw: str) -> None:
    text = " ".join(raw.split())
    if not text:
        return
    tokens = MATH_PARSER.parse(escape.line(text))
    assert [token.type for token in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    assert _plain(tokens[1].children or []) == text
