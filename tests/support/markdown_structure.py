"""What a CommonMark parser (with GitHub tables) sees of a Markdown text: headings, list items and
table rows. The office tests and bench/office.py read the reader's output through it."""

from __future__ import annotations

from markdown_it import MarkdownIt


def structure(markdown: str) -> tuple[list[tuple[int, str]], list[str], list[list[str]]]:
    """Headings (level, text), list items' text and table rows, as a CommonMark parser sees them."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    headings: list[tuple[int, str]] = []
    items: list[str] = []
    rows: list[list[str]] = []
    row: list[str] = []
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            headings.append((int(token.tag[1]), tokens[index + 1].content))
        elif token.type == "list_item_open" and index + 2 < len(tokens):
            items.append(tokens[index + 2].content)
        elif token.type == "tr_open":
            row = []
        elif token.type in ("th_open", "td_open"):
            row.append(tokens[index + 1].content)
        elif token.type == "tr_close":
            rows.append(row)
    return headings, items, rows
