"""How much of an article's structure reaches the agent as Markdown: its headings and list items.

Neither development corpus annotates structure, so the gold is read from each page's own markup by
a plain reference reader (lxml's tree, no code shared with ours): every ``<h1>``..``<h6>`` and every
``<li>`` whose text (whitespace collapsed, at least MIN_CHARS characters) is part of the page's
reference text (zyte-dev's ``articleBody``, multilingual-dev's "with" segments) is a gold heading or
a gold list item. An extractor's Markdown marks one when markdown-it reads a heading (any level),
or a list item, whose text starts with the gold text's first KEY_CHARS characters (case and
spacing aside): a list item's text includes its nested lists, so only its beginning is compared.
Gold that an extractor drops counts as unmarked, as it does for the reader.

Our Markdown is read with its ``[text][n]`` references defined by the result's links. Used by
bench/extraction.py, which prints ours (main and full, Markdown) beside trafilatura's Markdown
(``output_format="markdown"``) from the same pages in the same run (``--structure``: only this).
"""

from __future__ import annotations

from dataclasses import dataclass, field

MIN_CHARS = 12
KEY_CHARS = 40
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()[:KEY_CHARS]


@dataclass
class Gold:
    headings: list[str] = field(default_factory=list)  # keys
    items: list[str] = field(default_factory=list)


def gold(body: bytes, reference: str) -> Gold:
    """The page's headings and list items that belong to its reference text."""
    import lxml.html

    found = Gold()
    try:
        tree = lxml.html.fromstring(body)
    except (ValueError, lxml.etree.ParserError):
        return found
    wanted = " ".join(reference.split()).casefold()
    for element in tree.iter(*_HEADINGS, "li"):
        text = " ".join(element.text_content().split())
        if len(text) < MIN_CHARS or text.casefold() not in wanted:
            continue
        (found.headings if element.tag in _HEADINGS else found.items).append(_key(text))
    return found


@dataclass
class Marked:
    headings: list[str] = field(default_factory=list)
    items: list[str] = field(default_factory=list)


def marked(markdown: str) -> Marked:
    """The keys of the headings and list items markdown-it reads in ``markdown``."""
    from markdown_it import MarkdownIt
    from markdown_it.tree import SyntaxTreeNode

    found = Marked()
    tree = SyntaxTreeNode(MarkdownIt("commonmark").enable("table").parse(markdown))
    for node in tree.walk():
        if node.type == "heading":
            found.headings.append(_key(_text(node)))
        elif node.type == "list_item":
            found.items.append(_key(_text(node)))
    return found


def _text(node: object) -> str:
    """The text a reader sees in a node, an image's alt text left out (lxml's text_content, which
    reads the gold, has none either)."""
    parts: list[str] = []
    for child in node.children:  # type: ignore[attr-defined]
        if child.type in ("text", "code_inline"):
            parts.append(str(child.content))
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type != "image":
            parts.append(" " if child.type == "paragraph" else "")
            parts.append(_text(child))
    return "".join(parts)


@dataclass
class Tally:
    gold_headings: int = 0
    gold_items: int = 0
    headings: int = 0
    items: int = 0

    def add(self, page: Gold, markdown: str) -> None:
        shown = marked(markdown)
        self.gold_headings += len(page.headings)
        self.gold_items += len(page.items)
        self.headings += _hits(page.headings, shown.headings)
        self.items += _hits(page.items, shown.items)

    def shares(self) -> tuple[float, float]:
        return (
            self.headings / self.gold_headings if self.gold_headings else 0.0,
            self.items / self.gold_items if self.gold_items else 0.0,
        )


def _hits(wanted: list[str], shown: list[str]) -> int:
    """Gold entries matched one-to-one by marked ones that start with them."""
    left = list(shown)
    hits = 0
    for key in wanted:
        for position, candidate in enumerate(left):
            if candidate.startswith(key) or (len(candidate) >= MIN_CHARS and key.startswith(candidate)):
                del left[position]
                hits += 1
                break
    return hits


def references(links: list[str]) -> str:
    """Reference definitions for a result's ``[text][n]`` links (n from 1 in ``links``), written
    here rather than taken from the reader, so the reading of the Markdown does not rest on it."""
    return "\n".join(f"[{number}]: <{link}>" for number, link in enumerate(links, 1))
