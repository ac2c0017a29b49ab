"""format="markdown": a page's structure, and only its structure, as CommonMark with GitHub tables.

Every test parses the Markdown the reader wrote with a real CommonMark parser (markdown-it-py with
its GFM table rule) and compares the tree it reads (headings with levels, list items with their
numbers, table cells, code blocks, block quotes, link targets, text) with the page's structure.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from jobs.reader.document import build_document, cut_text, render_whole
from jobs.reader.formats import Readable, fenced, page_offsets, pdf_markdown, whole_text
from tests.test_markdown_escape import HOSTILE

PARSER = MarkdownIt("commonmark").enable("table")
PAGE_URL = "https://example.org/page"
# Words of Markdown's special characters beside plain ones: the page's text must stay its text.
ALPHABET = "#*_-+=`~|<>[]()!\\&;:.0123456789aZé"

Tree = tuple[Any, ...]


async def markdown_of(page: str, **kwargs: Any) -> str:
    document = await build_document(
        page.encode(),
        "text/html; charset=utf-8",
        PAGE_URL,
        extract=kwargs.pop("extract", "full"),
        max_chars=kwargs.pop("max_chars", 1_000_000),
        cpu_budget_s=10.0,
        body_truncated=False,
        format="markdown",
    )
    return resolved(document.text, document.links)


def resolved(markdown: str, links: list[str]) -> str:
    """The Markdown with its ``[text][n]`` references defined by the result's links (n from 1), as
    docs/reader.md tells a renderer to read it."""
    if not links:
        return markdown
    return markdown + "\n\n" + "\n".join(f"[{n}]: <{link}>" for n, link in enumerate(links, 1))


def read(markdown: str) -> list[Tree]:
    """The tree markdown-it reads, in the shapes the tests compare."""
    return [_node(child) for child in SyntaxTreeNode(PARSER.parse(markdown)).children]


def _node(node: SyntaxTreeNode) -> Tree:
    kind = node.type
    if kind == "heading":
        return ("h", int(node.tag[1]), *_inline(node.children[0]))
    if kind == "paragraph":
        return ("p", *_inline(node.children[0]))
    if kind in ("bullet_list", "ordered_list"):
        start = int(str(node.attrs.get("start", 1))) if kind == "ordered_list" else None
        items = tuple(tuple(_node(part) for part in item.children) for item in node.children)
        return ("list", start, items)
    if kind in ("fence", "code_block"):
        return ("code", node.content.removesuffix("\n"))
    if kind == "blockquote":
        return ("quote", tuple(_node(child) for child in node.children))
    if kind == "table":
        rows = [row for section in node.children for row in section.children]
        return (
            "table",
            tuple(
                tuple(_inline(cell.children[0])[0] if cell.children else "" for cell in row.children)
                for row in rows
            ),
        )
    raise AssertionError(f"unexpected block {kind}")


def _inline(node: SyntaxTreeNode) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The inline content's text (breaks as spaces) and its links as (text, href); anything else
    (emphasis, code, HTML, an image) is markup the page wrote, and fails the test."""
    text: list[str] = []
    links: list[tuple[str, str]] = []
    for child in node.children:
        if child.type == "text":
            text.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            text.append(" ")
        elif child.type == "link":
            inner = "".join(grand.content for grand in child.children if grand.type == "text")
            assert all(grand.type == "text" for grand in child.children), "markup inside a link"
            links.append((inner, str(child.attrs["href"])))
            text.append(inner)
        else:
            raise AssertionError(f"markup the page wrote: {child.type}")
    return " ".join("".join(text).split()), tuple(links)


# Generated pages: each strategy gives (html, the tree markdown-it must read).

words = st.text(ALPHABET, min_size=1, max_size=6)
texts = st.lists(words, min_size=1, max_size=4).map(" ".join)


@st.composite
def paragraphs(draw: st.DrawFn) -> tuple[str, Tree]:
    parts = draw(st.lists(st.tuples(texts, st.booleans(), st.integers(0, 9)), min_size=1, max_size=3))
    markup: list[str] = []
    shown: list[str] = []
    links: list[tuple[str, str]] = []
    for text, linked, number in parts:
        if linked:
            href = f"https://example.org/p/{number}"
            markup.append(f'<a href="{href}">{html.escape(text)}</a>')
            links.append((text, PARSER.normalizeLink(href)))
        else:
            markup.append(html.escape(text))
        shown.append(text)
    return f"<p>{' '.join(markup)}</p>", ("p", " ".join(shown), tuple(links))


@st.composite
def headings(draw: st.DrawFn) -> tuple[str, Tree]:
    level = draw(st.integers(1, 6))
    text = draw(texts)
    return f"<h{level}>{html.escape(text)}</h{level}>", ("h", level, text, ())


@st.composite
def code_blocks(draw: st.DrawFn) -> tuple[str, Tree]:
    lines = draw(st.lists(st.text(ALPHABET + " ", min_size=0, max_size=12), min_size=1, max_size=3))
    code = "\n".join(lines).rstrip().lstrip("\n")  # a <pre>'s first newline is not its text
    if not code.strip():
        code = "x"
    return f"<pre>{html.escape(code)}</pre>", ("code", code)


@st.composite
def tables(draw: st.DrawFn) -> tuple[str, Tree]:
    width = draw(st.integers(2, 3))
    rows: list[list[str]] = []
    markup: list[str] = []
    for position in range(draw(st.integers(1, 3))):
        cells = draw(st.lists(texts, min_size=1, max_size=width))
        span = 2 if len(cells) < width and draw(st.booleans()) else 1
        tag = "th" if position == 0 else "td"
        written = [f"<{tag}>{html.escape(cell)}</{tag}>" for cell in cells]
        row = list(cells)
        if span == 2:
            written[0] = f'<{tag} colspan="2">{html.escape(cells[0])}</{tag}>'
            row.insert(1, "")
        rows.append(row)
        markup.append("<tr>" + "".join(written) + "</tr>")
    columns = max(len(row) for row in rows)
    if columns < 2:
        rows[0].append("z")
        markup[0] = markup[0].replace("</tr>", "<td>z</td></tr>")
        columns = 2
    expected = tuple(tuple(row + [""] * (columns - len(row))) for row in rows)
    return "<table>" + "".join(markup) + "</table>", ("table", expected)


def lists(children: st.SearchStrategy[list[tuple[str, Tree]]]) -> st.SearchStrategy[tuple[str, Tree]]:
    @st.composite
    def build(draw: st.DrawFn) -> tuple[str, Tree]:
        ordered = draw(st.booleans())
        start = draw(st.integers(0, 20)) if ordered else None
        items: list[tuple[Tree, ...]] = []
        markup: list[str] = []
        for _ in range(draw(st.integers(1, 3))):
            text = draw(texts)
            nested = draw(st.one_of(st.none(), children))
            inner = html.escape(text) + ("" if nested is None else "".join(part for part, _ in nested))
            markup.append(f"<li>{inner}</li>")
            items.append((("p", text, ()), *([] if nested is None else [tree for _, tree in nested])))
        tag = "ol" if ordered else "ul"
        opening = f'<ol start="{start}">' if ordered else "<ul>"
        return opening + "".join(markup) + f"</{tag}>", ("list", start, tuple(items))

    return build()


def quotes(children: st.SearchStrategy[list[tuple[str, Tree]]]) -> st.SearchStrategy[tuple[str, Tree]]:
    return children.map(
        lambda parts: (
            "<blockquote>" + "".join(part for part, _ in parts) + "</blockquote>",
            ("quote", tuple(tree for _, tree in parts)),
        )
    )


leaf_blocks = st.one_of(paragraphs(), headings(), code_blocks())
# What a list item holds after its own text: a nested list (two levels deep), code, a table, a quote.
flat_lists = lists(st.nothing())
item_children = st.lists(
    st.one_of(
        lists(st.lists(flat_lists, min_size=1, max_size=1)),
        code_blocks(),
        tables(),
        quotes(st.lists(st.one_of(paragraphs(), flat_lists), min_size=1, max_size=2)),
    ),
    min_size=1,
    max_size=2,
)
inner_blocks = st.lists(st.one_of(leaf_blocks, tables(), lists(item_children)), min_size=1, max_size=3)
documents = st.lists(
    st.one_of(leaf_blocks, tables(), lists(item_children), quotes(inner_blocks)), min_size=1, max_size=5
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
async def test_markdown_parses_into_the_structure_of_the_page(parts: list[tuple[str, Tree]]) -> None:
    page = "<!doctype html><html><body>" + "".join(part for part, _ in parts) + "</body></html>"
    markdown = await markdown_of(page)
    assert read(markdown) == [tree for _, tree in parts], markdown


async def test_each_hostile_paragraph_stays_one_paragraph_of_the_same_text() -> None:
    for text in HOSTILE:
        markdown = await markdown_of(f"<p>{html.escape(text)}</p><p>after</p>")
        assert read(markdown) == [("p", " ".join(text.split()), ()), ("p", "after", ())], text


@given(st.lists(st.text(ALPHABET + " ", min_size=1, max_size=30), min_size=1, max_size=3))
async def test_any_paragraph_text_stays_literal_across_its_line_breaks(lines: list[str]) -> None:
    shown = [" ".join(line.split()) for line in lines if line.split()]
    if not shown:
        return
    markdown = await markdown_of("<p>" + "<br>".join(html.escape(line) for line in lines) + "</p>")
    assert read(markdown) == [("p", " ".join(shown), ())]
    assert markdown.count("\\\n") == len(shown) - 1  # each <br> a hard break


async def test_only_links_among_the_pages_links_are_written_as_links() -> None:
    markdown = await markdown_of(
        '<p><a href="/ok">kept</a> <a href="javascript:alert(1)">script</a> '
        '<a href="http://example.org/plain">insecure</a> <a href="mailto:a@example.org">mail</a></p>'
    )
    assert read(markdown) == [("p", "kept script insecure mail", (("kept", "https://example.org/ok"),))]


async def test_an_exclamation_mark_before_a_link_does_not_make_it_an_image() -> None:
    markdown = await markdown_of('<p>wow!<a href="/x">there</a></p>')
    assert read(markdown) == [("p", "wow!there", (("there", "https://example.org/x"),))]


async def test_an_image_is_an_image_of_its_alt_text() -> None:
    markdown = await markdown_of(
        '<p>See <img src="/a.png" alt="a *chart*"> below</p><p><img alt="Lead"> text</p>'
    )
    assert markdown == "See ![a \\*chart\\*]() below\n\n![Lead]() text"
    tokens = PARSER.parse(markdown)
    alts = [
        "".join(grand.content for grand in child.children or [])
        for token in tokens
        for child in token.children or []
        if child.type == "image"
    ]
    assert alts == ["a *chart*", "Lead"]


async def test_a_one_column_table_is_read_as_paragraphs() -> None:
    markdown = await markdown_of(
        "<table><tr><td><h2>Title</h2><p>One.</p></td></tr><tr><td>Two.</td></tr></table>"
    )
    assert read(markdown) == [("h", 2, "Title", ()), ("p", "One.", ()), ("p", "Two.", ())]


async def test_a_cell_with_blocks_is_flattened_and_a_colspan_keeps_the_width() -> None:
    markdown = await markdown_of(
        "<table><thead><tr><th>A</th><th>B</th><th>C</th></tr></thead>"
        "<tbody><tr><td colspan=2><p>one</p><ul><li>two</li></ul></td><td>x<br>y</td></tr>"
        "<tr><td>1</td></tr></tbody></table>"
    )
    assert read(markdown) == [("table", (("A", "B", "C"), ("one two", "", "x y"), ("1", "", "")))]


async def test_an_empty_cell_keeps_the_cells_after_it_in_their_columns() -> None:
    markdown = await markdown_of("<table><tr><th>A<th>B<th>C<tr><td>1<td><td>3<tr><td><td>5</table>")
    assert read(markdown) == [("table", (("A", "B", "C"), ("1", "", "3"), ("", "5", "")))]


async def test_an_ordered_list_keeps_its_start_and_its_numbering() -> None:
    markdown = await markdown_of("<ol start=7><li>a</li><li>b</li></ol>")
    assert markdown == "7. a\n\n8. b"
    assert read(markdown) == [("list", 7, ((("p", "a", ()),), (("p", "b", ()),)))]


async def test_two_lists_in_a_row_stay_two_lists() -> None:
    markdown = await markdown_of(
        "<ul><li>a</li></ul><ul><li>b</li></ul><ol><li>c</li></ol><ol><li>d</li></ol>"
    )
    assert [tree[0] for tree in read(markdown)] == ["list", "list", "list", "list"]


async def test_code_in_a_list_item_stays_an_item() -> None:
    markdown = await markdown_of("<ul><li><code>pip install x</code></li></ul>")
    assert read(markdown) == [("list", None, ((("p", "pip install x", ()),),))]


async def test_code_blocks_keep_their_text_with_a_fence_longer_than_its_backticks() -> None:
    code = "def f():\n    return '```'\n\n````"
    markdown = await markdown_of(f"<pre><code>{html.escape(code)}</code></pre><div><code>a  b</code></div>")
    assert read(markdown) == [("code", code), ("code", "a b")]


async def test_inline_code_in_a_sentence_stays_in_the_paragraph() -> None:
    markdown = await markdown_of("<p><code>npm</code> is a tool</p>")
    assert read(markdown) == [("p", "npm is a tool", ())]


async def test_the_text_format_is_the_plain_text_and_main_content_picks_the_same_blocks() -> None:
    prose = "A sentence long enough to count as the prose of an article, and then some more. " * 4
    page = (
        "<nav><ul><li><a href='/a'>Home</a></li><li><a href='/b'>About</a></li></ul></nav>"
        f"<article><h2>Heading of it</h2><p>{prose}</p><p>{prose}</p></article><footer>Footer text</footer>"
    )
    common = dict(extract="main", max_chars=100_000, cpu_budget_s=10.0, body_truncated=False)
    text = await build_document(page.encode(), "text/html", PAGE_URL, format="text", **common)  # type: ignore[arg-type]
    markdown = await build_document(page.encode(), "text/html", PAGE_URL, format="markdown", **common)  # type: ignore[arg-type]
    assert (text.format, markdown.format) == ("text", "markdown")
    assert text.text == f"Heading of it\n{prose.strip()}\n{prose.strip()}"
    assert markdown.text == f"## Heading of it\n\n{prose.strip()}\n\n{prose.strip()}"
    assert render_whole(text, "markdown") == markdown.text
    assert render_whole(markdown, "text") == text.text


async def test_the_character_bound_is_counted_on_the_markdown() -> None:
    page = "".join(f"<h2>Part {n}</h2><ul><li>item {n}</li></ul>" for n in range(200))
    document = await build_document(
        page.encode(),
        "text/html",
        PAGE_URL,
        extract="full",
        max_chars=500,
        cpu_budget_s=10.0,
        body_truncated=False,
        format="markdown",
    )
    whole = render_whole(document, "markdown")
    assert document.truncated is True
    assert document.text == cut_text(whole, 500)
    assert len(document.text) == 500 and len(whole) > 500


def test_a_pdf_is_its_pages_text_after_a_marker_line_each() -> None:
    markdown = pdf_markdown(["# Not a heading\n    not code", "", "| a | b |"])
    assert markdown == (
        "<!-- page 1 -->\n\n\\# Not a heading\nnot code\n\n"
        "<!-- page 2 -->\n\n<!-- page 3 -->\n\n\\| a \\| b \\|"
    )
    tokens = [node.type for node in SyntaxTreeNode(PARSER.parse(markdown)).children]
    assert tokens == ["html_block", "paragraph", "html_block", "html_block", "paragraph"]


def test_a_body_that_is_not_html_is_one_code_block_of_exactly_itself() -> None:
    body = '{"a": "``` # [x](javascript:1)"}\n````'
    assert read(fenced(body)) == [("code", body)]


# Tag soup: any sequence of start tags, end tags and hostile text, unclosed and misnested as pages
# are. Whatever structure it makes, the Markdown must read back as exactly the plain text's words,
# with no markup but the reader's own.

SOUP_TAGS = ["p", "h2", "h4", "ul", "ol", "li", "table", "tr", "td", "th", "thead", "caption"]
SOUP_TAGS += ["blockquote", "pre", "code", "div", "span", "b", "dl", "dt", "dd", "section"]


@st.composite
def soups(draw: st.DrawFn) -> str:
    parts: list[str] = []
    for _ in range(draw(st.integers(1, 25))):
        choice = draw(st.integers(0, 5))
        tag = draw(st.sampled_from(SOUP_TAGS))
        if choice == 0:
            parts.append(f"<{tag}>")
        elif choice == 1:
            parts.append(f"</{tag}>")
        elif choice == 2:
            parts.append(f'<a href="/l/{draw(st.integers(0, 3))}">')
        elif choice == 3:
            parts.append(draw(st.sampled_from(["</a>", "<br>", '<td colspan="3">', '<ol start="5">'])))
        else:
            parts.append(html.escape(draw(texts)) + draw(st.sampled_from(["", " ", "\n"])))
    return "".join(parts)


def read_words(markdown: str) -> list[str]:
    """The words a reader of the Markdown sees, in order; markup the page wrote fails the test."""
    words: list[str] = []
    for token in PARSER.parse(markdown):
        if token.type == "inline":
            line: list[str] = []
            for child in token.children or []:
                assert child.type in ("text", "softbreak", "hardbreak", "link_open", "link_close"), child.type
                if child.type == "link_open":
                    assert str(child.attrs["href"]).startswith("https://example.org/l/")
                line.append(" " if child.type.endswith("break") else child.content)
            words.extend("".join(line).split())
        elif token.type in ("fence", "code_block"):
            words.extend(token.content.split())
        else:
            assert token.type.endswith(("_open", "_close")), token.type
    return words


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(soups())
async def test_tag_soup_reads_back_as_the_words_of_the_plain_text_and_no_other_markup(soup: str) -> None:
    common: dict[str, Any] = dict(
        extract="full", max_chars=1_000_000, cpu_budget_s=10.0, body_truncated=False
    )
    text = await build_document(soup.encode(), "text/html; charset=utf-8", PAGE_URL, format="text", **common)
    markdown = resolved(render_whole(text, "markdown"), text.links)
    assert read_words(markdown) == text.text.split(), markdown


@given(st.lists(st.text(ALPHABET + " \n", max_size=20), min_size=1, max_size=5))
def test_each_pdf_page_offset_is_where_that_page_starts_in_either_format(pages: list[str]) -> None:
    pages = [page.strip() for page in pages]
    readable = Readable("\n\n".join(page for page in pages if page), pages=pages)
    markdown = whole_text(readable, "markdown")
    offsets = page_offsets(readable, "markdown")
    assert offsets is not None and len(offsets) == len(pages)
    for number, offset in enumerate(offsets, 1):
        marker = f"<!-- page {number} -->"
        assert markdown[offset:].startswith(marker)
        assert markdown[offset + len(marker) : offset + len(marker) + 1] in ("\n", "")
    text = whole_text(readable, "text")
    starts = page_offsets(readable, "text")
    assert starts is not None
    for page, start in zip(pages, starts, strict=True):
        if page:
            assert text[start:].startswith(page)


async def test_lists_nested_thousands_deep_stop_nesting_at_the_frame_bound() -> None:
    page = "<ul><li>" * 3000 + "deep" + "<blockquote>" * 3000 + "quoted"
    document = await build_document(
        page.encode(),
        "text/html",
        PAGE_URL,
        extract="full",
        max_chars=1_000_000,
        cpu_budget_s=10.0,
        body_truncated=False,
        format="markdown",
    )
    lines = document.text.split("\n")
    assert max(len(line) for line in lines) < 100  # 16 frames of indentation at most
    assert read_words(document.text) == ["deep", "quoted"]


async def test_a_table_of_huge_colspans_stays_bounded_in_width() -> None:
    page = "<table><tr>" + "<th>h</th>" * 3 + "<tr>" + '<td colspan="1000">x</td>' * 200 + "</table>"
    markdown = await markdown_of(page)
    widths = {line.count(" | ") + 1 for line in markdown.split("\n")}
    assert widths == {64}
    assert read_words(markdown) == ["h", "h", "h"] + ["x"] * 200


# html5lib's tree-construction tests: every document there, misnested and broken as browsers meet
# them, reads back from its Markdown as the words of its plain text and no markup of its own.

CORPUS = Path(
    os.environ.get("HTML5LIB_TESTS", Path(__file__).resolve().parents[2] / "shared/data/html5lib-tests")
)


def tree_documents() -> list[Any]:
    folder = CORPUS / "tree-construction"
    if not folder.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no html5lib test corpus at {folder}"))]
    documents: list[str] = []
    for path in sorted(folder.glob("*.dat")):
        for section in path.read_text(encoding="utf-8").split("\n\n#data\n"):
            data = section.removeprefix("#data\n").split("\n#errors", 1)[0]
            if "#document-fragment" not in section:
                documents.append(data)
    return [
        pytest.param(documents[start : start + 100], id=f"from-{start}")
        for start in range(0, len(documents), 100)
    ]


@pytest.mark.parametrize("documents", tree_documents())
async def test_the_html5lib_trees_read_back_as_their_plain_text_and_no_other_markup(
    documents: list[str],
) -> None:
    for page in documents:
        document = await build_document(
            page.encode(),
            "text/html; charset=utf-8",
            PAGE_URL,
            extract="full",
            max_chars=1_000_000,
            cpu_budget_s=10.0,
            body_truncated=False,
            format="markdown",
        )
        markdown = resolved(document.text, document.links)
        assert _words_any_link(markdown) == render_whole(document, "text").split(), page


def _words_any_link(markdown: str) -> list[str]:
    """read_words, for pages whose links go anywhere on the page's site."""
    words: list[str] = []
    for token in PARSER.parse(markdown):
        if token.type == "inline":
            line: list[str] = []
            for child in token.children or []:
                assert child.type in ("text", "softbreak", "hardbreak", "link_open", "link_close"), child.type
                line.append(" " if child.type.endswith("break") else child.content)
            words.extend("".join(line).split())
        elif token.type in ("fence", "code_block"):
            words.extend(token.content.split())
        else:
            assert token.type.endswith(("_open", "_close")), token.type
    return words
