"""The streaming reducer: HTML to blocks of readable text on html5lib's tokenizer, never its tree.

html5lib's tree builder is quadratic in nesting depth (20,000 nested divs, about 100 KB, took 35 s
to parse); its tokenizer is linear. So the reducer runs the tokenizer and keeps only what the text
needs: the stack of open elements with the few tree-construction rules that decide where an
element ends (open_elements), and it switches the tokenizer into the raw-text states itself, since
only the tree builder would (``<script>``, ``<style>``, ``<title>``...).

The output is a sequence of blocks (blocks.py: one per paragraph, heading, list item, table
cell...) with the context each sat in (nav, footer, article, link text...) and the ranges of the
block-level elements that held them, so main-content selection can work on it without ever
building a tree. ``run`` works in slices so the caller can yield to the event loop and stop at a
CPU budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from jobs.reader.html import elements as el
from jobs.reader.html.blocks import Block, BlockWriter, Container, Context
from jobs.reader.html.foreign import ForeignContent
from jobs.reader.html.open_elements import MATH, SVG, OpenElements
from jobs.reader.html.streamed import Streamed, is_shadow_root
from jobs.reader.html.structure import STRUCTURAL, Frames
from jobs.reader.html.tokens import CHARACTERS, END_TAG, SPACE_CHARACTERS, START_TAG, StreamingTokenizer
from jobs.reader.html.visibility import SelectDisplay, hiding_bits
from jobs.reader.html.vocabulary import (
    ARTICLE,
    CONTENT_HINT,
    DROP,
    HEADER,
    HEADING,
    HIDDEN,
    LINK,
    MAIN,
    NAME_BITS,
    ROLE_BITS,
    TITLE,
    hint_bits,
)
from jobs.reader.metadata.declarations import WATCHED, Declarations
from jobs.reader.script_shell import ShellSignals

CLOSERS = (
    el.CLOSES_P
    | el.HEADINGS
    | el.CELLS
    | {"li", "dd", "dt", "a", "tr", "tbody", "thead", "tfoot", "option", "optgroup"}
)
RAW_TEXT = el.RCDATA | el.RAWTEXT | {"script", "plaintext"}
HINTED = el.BLOCK | el.CELLS | {"span", "section"}
MAX_HREFS = 5000
# A page of thousands of embeds is read for its first few: each costs a URL parse later.
MAX_EMBEDS = 100
# Elements that embed a document, and the attribute that names it.
EMBEDDING = {"iframe": "src", "embed": "src", "object": "data"}


@dataclass
class Reduction:
    blocks: list[Block]
    containers: list[Container]
    title: str
    hrefs: list[str]  # distinct raw href values of visible links, in page order
    base_href: str | None
    hidden_removed: int
    complete: bool  # False when stopped early: the CPU budget, or the block cap
    declarations: Declarations  # what the page declares about itself, for its metadata
    shell: ShellSignals = field(default_factory=ShellSignals)  # the app-shell signals of the markup
    # Images apart from any text: (the index of the block each stands before, a block with no
    # plain text whose Markdown is the alt text), in page order.
    pictures: list[tuple[int, Block]] = field(default_factory=list)
    # The raw (URL, type) of each visible iframe, embed or object, in page order (jobs.reader.embedded).
    embeds: list[tuple[str, str]] = field(default_factory=list)


class Reducer:
    """One document's reduction: ``run`` it until it says done (or the budget says stop), then
    take its ``result``."""

    def __init__(self, html: str) -> None:
        self._tokenizer = StreamingTokenizer(html)
        self._at = context = Context()
        self._writer = BlockWriter(context)
        self._stack = OpenElements(self._writer, context)
        self._foreign = ForeignContent(self._stack, self._writer)
        self._selects = SelectDisplay(self._stack, self._writer)
        self._tokenizer.cdata_allowed = self._foreign.in_foreign_node
        self._hrefs: list[str] = []
        self._href_ids: dict[str, int] = {}  # each distinct href's index in _hrefs
        self._frames = Frames()
        self._anchors = 0  # <a> elements opened so far
        self._base_href: str | None = None
        self._hint_cache: dict[str, int] = {}
        self._finished = False
        self._complete = False
        self._declarations = Declarations()
        self._shell = ShellSignals()
        self._streamed = Streamed(html)
        self._embeds: list[tuple[str, str]] = []

    def run(self, seconds: float) -> bool:
        """Reduce for about ``seconds`` of work; True once the whole document is reduced."""
        if self._finished:
            return True
        tokenizer = self._tokenizer
        queue = tokenizer.tokenQueue
        writer = self._writer
        clock = time.perf_counter
        deadline = clock() + seconds
        text, space, start, end = writer.text, writer.space, self._start, self._end
        while True:
            more = tokenizer.state()
            while queue:
                token = queue.popleft()
                kind = token["type"]
                if kind == CHARACTERS:
                    text(token["data"])
                elif kind == START_TAG:
                    start(token["name"], token["data"], token["selfClosing"])
                elif kind == END_TAG:
                    end(token["name"])
                elif kind == SPACE_CHARACTERS:
                    space(token["data"])
            if not more:
                self._complete = True
                self.finish()
                return True
            if writer.full:
                self.finish()
                return True
            # The clock is read after every step: a step reads at most one 10 KB chunk, but the
            # text it yields may take milliseconds to strip of invisible characters.
            if clock() >= deadline:
                return False

    def finish(self) -> None:
        """Close whatever is open, as the end of the document does; safe to call more than once."""
        if self._finished:
            return
        self._stack.pop_to(0)
        self._writer.flush()
        self._finished = True

    def result(self) -> Reduction:
        writer = self._writer
        self._streamed.move_into_place(writer.blocks, writer.containers, writer.pictures)
        title, invisible = writer.title()
        return Reduction(
            blocks=writer.blocks,
            containers=writer.containers,
            title=title,
            hrefs=self._hrefs,
            base_href=self._base_href,
            hidden_removed=writer.hidden + invisible,
            complete=self._complete,
            declarations=self._declarations,
            shell=self._shell,
            pictures=writer.pictures,
            embeds=self._embeds,
        )

    def _start(self, name: str, attrs: dict[str, str], self_closing: bool) -> None:
        self._shell.start(name, attrs)
        stack = self._stack
        if name in WATCHED:
            self._declarations.start(name, attrs, stack.bits, self._tokenizer)
        elif attrs and "itemprop" in attrs:
            self._declarations.itemprop(attrs, stack.bits, len(self._writer.blocks))
        entries = stack.entries
        foreign = self._foreign
        if (
            entries
            and entries[-1].ns
            and foreign.takes_start(name)
            and foreign.start(name, attrs, self_closing)
        ):
            return
        if name in EMBEDDING:
            self._embed(name, attrs)
        if name in el.VOID:
            self._void(name, attrs)
            return
        if name == "textarea" and not stack.bits & (HIDDEN | DROP) and not hiding_bits(name, attrs):
            stack.boxes += 1
        if name in ("html", "body", "head"):
            if name != "head" and hiding_bits(name, attrs):
                stack.hide_root()
            return
        if name == "svg" or name == "math":
            foreign.insert(name, attrs, self_closing, SVG if name == "svg" else MATH)
            return
        if name in CLOSERS:
            stack.close_implied(name)
        if name == "select" and stack.counts.get("select"):
            # A select inside a select ends the first, as browsers parse it.
            stack.close_in_scope("select", el.SCOPE_BOUNDARY)
            return
        if name in RAW_TEXT:
            self._switch_tokenizer(name)
        bits = stack.bits
        own = bits | NAME_BITS.get(name, 0)
        segment = None
        if name == "template":
            self._template(attrs)
            if not is_shadow_root(attrs):
                own |= DROP
        elif name in el.DROPPED or name == "select":
            own |= DROP  # a select's own text is never shown; SelectDisplay decides its options
        elif name == "title":
            if not self._writer.has_title and not bits & (DROP | HIDDEN):
                self._writer.start_title()
                own |= TITLE
            else:
                own |= DROP
        elif name == "option":
            own = self._selects.option_bits(own, attrs)
        if name == "header" and not own & (ARTICLE | MAIN) and not stack.counts.get("section"):
            # A <header> inside sectioning content heads that section (a recipe card's title, a
            # chapter's heading), as ARIA reads it; only the page's own is its banner.
            own |= HEADER
        if not own & DROP:
            if "hidden" in attrs and name in el.BLOCK:
                segment = self._streamed.shown_segment(name, attrs, True)
            own |= hiding_bits(name, _shown(attrs) if segment else attrs)
            if attrs:
                own = self._attribute_bits(name, attrs, own)
        kind = self._at.kind
        if name in el.BLOCK:
            self._writer.boundary("\n")
            kind = name
        elif name in el.CELLS:
            self._writer.boundary("\t")
            kind = name
        if own & HEADING and kind is name and name not in el.HEADINGS:
            kind = _heading_kind(attrs, self._at.kind)
        # What Markdown needs: the list, quote or table part it opens, and the link it is.
        frame = self._frames.open(name, attrs, self._at.frame) if name in STRUCTURAL else None
        link = None
        if name == "a":
            href = attrs.get("href")
            number = -1 if href is None else self._href_ids.get(href, -1)
            # Two links in a row to the same href are two links: their parity tells them apart.
            link = -1 if number < 0 else 2 * number + (self._anchors & 1)
            self._anchors += 1
        stack.push(name, own, kind, name in el.BLOCK or name in el.CELLS, 0, frame, link)
        if segment is not None:
            self._streamed.segments[segment] = stack.entries[-1].block_id
        if name == "select":
            self._selects.opened(attrs)

    def _template(self, attrs: dict[str, str]) -> None:
        """A streamed part's placeholder: where its content goes, once the page's script runs."""
        streamed = self._streamed
        placeholder = streamed.placeholder(attrs) if "id" in attrs else None
        if placeholder is None:
            return
        self._writer.boundary("\n")  # the part is blocks of its own, not the end of a line
        around = frozenset(entry.block_id for entry in self._stack.entries)
        streamed.placeholders.setdefault(placeholder, (len(self._writer.blocks), self._stack.bits, around))

    def _end(self, name: str) -> None:
        if self._foreign.in_foreign_node():
            self._foreign.end(name)
        else:
            self._stack.end(name)

    def _attribute_bits(self, name: str, attrs: dict[str, str], own: int) -> int:
        if name == "a":
            href = attrs.get("href")
            if href is not None:
                own |= LINK
                if not own & (HIDDEN | DROP):
                    self._add_href(href)
        role = attrs.get("role")
        if role:
            own |= ROLE_BITS.get(role.strip().lower(), 0)
        if attrs.get("itemprop", "").lower() == "articlebody":
            own |= CONTENT_HINT
        if name in HINTED:
            # A heading's id is its anchor, a slug of what it says ("related-work", "nav_summary"):
            # only its class names its part.
            names = attrs.get("class", "") + " " + ("" if name in el.HEADINGS else attrs.get("id", ""))
            if len(names) > 1:
                hint = self._hint_cache.get(names)
                if hint is None:
                    hint = hint_bits(names)
                    self._hint_cache[names] = hint
                own |= hint
        return own

    def _void(self, name: str, attrs: dict[str, str]) -> None:
        if name == "br":
            self._writer.line_break()
        elif name == "img" or name == "image":
            alt = attrs.get("alt")
            if alt and not self._stack.bits & (HIDDEN | DROP) and not hiding_bits(name, attrs):
                self._writer.alt_text(alt)
        elif name == "hr":
            self._writer.boundary("\n")
        elif name == "area":
            href = attrs.get("href")
            if href is not None and not self._stack.bits & (HIDDEN | DROP) and not hiding_bits(name, attrs):
                self._add_href(href)
        elif name == "base" and self._base_href is None and "href" in attrs:
            self._base_href = attrs["href"]

    def _embed(self, name: str, attrs: dict[str, str]) -> None:
        """Note what a shown iframe, embed or object embeds (its fallback content is never read)."""
        url = attrs.get(EMBEDDING[name])
        if (
            url
            and len(self._embeds) < MAX_EMBEDS
            and not self._stack.bits & (HIDDEN | DROP)
            and not hiding_bits(name, attrs)
        ):
            self._embeds.append((url, attrs.get("type", "")))

    def _add_href(self, href: str) -> None:
        if href not in self._href_ids and len(self._hrefs) < MAX_HREFS:
            self._href_ids[href] = len(self._hrefs)
            self._hrefs.append(href)

    def _switch_tokenizer(self, name: str) -> None:
        tokenizer = self._tokenizer
        if name in el.RCDATA:
            tokenizer.state = tokenizer.rcdataState
        elif name == "script":
            tokenizer.skip_raw_text(name, tokenizer.scriptDataState)
        elif name in el.RAWTEXT:
            if name in el.DROPPED:
                tokenizer.skip_raw_text(name, tokenizer.rawtextState)
            else:
                tokenizer.state = tokenizer.rawtextState
        elif name == "plaintext":
            tokenizer.state = tokenizer.plaintextState


def _heading_kind(attrs: dict[str, str], around: str) -> str:
    """The heading a block-level element is: its own ``role=heading`` at its ``aria-level`` (2 when
    none, as ARIA says), else the heading it sits in (a ``<div>`` inside an ``<h1>`` is that
    heading's text, as a browser shows it)."""
    if attrs.get("role", "").strip().lower() == "heading":
        level = attrs.get("aria-level", "").strip()
        return f"h{min(6, max(1, int(level)))}" if level.isdigit() and len(level) < 3 else "h2"
    return around if around in el.HEADINGS else "h2"


def _shown(attrs: dict[str, str]) -> dict[str, str]:
    """The attributes without ``hidden``: a streamed part that its script will show."""
    return {key: value for key, value in attrs.items() if key != "hidden"}


def reduce_all(html: str) -> Reduction:
    """The whole document in one call (tests, benchmarks): no budget, no yielding."""
    reducer = Reducer(html)
    while not reducer.run(3600.0):
        pass
    return reducer.result()
