"""The stack of open elements, with the few tree-construction rules that decide where one ends.

An implied ``</p>``, ``</li>``, ``</td>``; an end tag that closes what it names only when that is
in scope; a template that never ends. Every walk down the stack is bounded, and so is its depth,
so no sequence of tags costs more than linear time. Popping an element ends its line of text
(when it is block-level) and records the range of blocks it held.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.reader.html import elements as el
from jobs.reader.html.blocks import BlockWriter, Container, Context
from jobs.reader.html.structure import Frame
from jobs.reader.html.vocabulary import HIDDEN

LISTS = frozenset({"ol", "ul", "menu"})
DEFINITION_LISTS = frozenset({"dl"})
BUTTON_SCOPE = el.SCOPE_BOUNDARY | {"button"}
# An open element's namespace (0 for HTML) and, for svg and math, its kind of integration point.
SVG = 1
MATH = 2
HTML_POINT = 4  # svg foreignObject, desc, title; math annotation-xml holding HTML: HTML inside
TEXT_POINT = 8  # math mi, mo, mn, ms, mtext: HTML start tags and text inside
SCOPING = 16  # the integration points above: an HTML end tag looks no further down than these
# Walks down the stack (looking for the element an end tag closes) stop after this many levels:
# a hostile page nests deeper only to make each walk quadratic; a real page is far shallower.
MAX_WALK = 256
# Browsers stop nesting at 512 open elements (deeper ones become siblings, as in Blink); so do we,
# which bounds every pass over the stack, including closing everything at the end.
MAX_DEPTH = 512


@dataclass(slots=True)
class Open:
    name: str
    bits: int
    kind: str
    start: int  # index of the first block inside it
    depth: int
    block_id: int  # its own id when it is block-level, else its block-level ancestor's
    parent_id: int
    ns: int = 0  # 0 for HTML, else SVG or MATH with the flags above
    children: int = 0  # elements opened directly inside it so far (counted for MathML layout)
    frame: Frame | None = None  # the innermost list, quote or table part it is in (structure.py)
    link: int = -1  # the link it is in: an index into the reduction's hrefs, or -1
    boxes: int = 0  # places to write met before it opened (OpenElements.boxes)


class OpenElements:
    def __init__(self, writer: BlockWriter, context: Context) -> None:
        self._writer = writer
        self.context = context  # kept current: the innermost open element's bits, kind and block
        self.entries: list[Open] = []
        self.counts: dict[str, int] = {}  # open elements by name, so a stray end tag costs nothing
        self.root_bits = 0  # what <html> or <body> attributes do to the whole document
        self._next_id = 1
        self.boxes = 0  # places to write (<textarea>) met so far: a container holds the difference

    @property
    def bits(self) -> int:
        return self.context.bits

    def push(
        self,
        name: str,
        bits: int,
        kind: str,
        block_level: bool,
        ns: int = 0,
        frame: Frame | None = None,
        link: int | None = None,
    ) -> None:
        """Open an element; ``frame`` and ``link`` are what it opens itself (None: it inherits)."""
        entries = self.entries
        if len(entries) >= MAX_DEPTH:
            self.pop_to(len(entries) - 1)
        at = self.context
        if frame is None:
            frame = at.frame
        if link is None:
            link = at.link
        parent_id = at.block_id
        block_id = parent_id
        if block_level:
            block_id = self._next_id
            self._next_id += 1
        entries.append(
            Open(
                name,
                bits,
                kind,
                len(self._writer.blocks),
                len(entries),
                block_id,
                parent_id,
                ns,
                0,
                frame,
                link,
                self.boxes,
            )
        )
        self.counts[name] = self.counts.get(name, 0) + 1
        at.bits = bits
        at.kind = kind
        at.block_id = block_id
        at.frame = frame
        at.link = link

    def pop_to(self, index: int) -> None:
        """Close every element from the top of the stack down to ``entries[index]``, inclusive."""
        entries = self.entries
        counts = self.counts
        writer = self._writer
        while len(entries) > index:
            entry = entries.pop()
            name = entry.name
            counts[name] -= 1
            if not entry.ns and name in el.BLOCK:
                writer.boundary("\n")
            elif not entry.ns and name in el.CELLS:
                writer.boundary("\t")
            if entry.block_id != entry.parent_id and len(writer.blocks) > entry.start:
                parent_bits = entries[-1].bits if entries else self.root_bits
                writer.record(
                    Container(
                        entry.start,
                        len(writer.blocks),
                        name,
                        entry.depth,
                        entry.bits,
                        entry.block_id,
                        entry.parent_id,
                        entry.bits & ~parent_bits,
                        self.boxes - entry.boxes,
                    )
                )
        at = self.context
        if entries:
            top = entries[-1]
            at.bits = top.bits
            at.kind = top.kind
            at.block_id = top.block_id
            at.frame = top.frame
            at.link = top.link
        else:
            at.bits = self.root_bits
            at.kind = "body"
            at.block_id = 0
            at.frame = None
            at.link = -1

    def hide_root(self) -> None:
        """``<body hidden>``: everything, open or to come, is hidden."""
        self.root_bits |= HIDDEN
        self.context.bits |= HIDDEN
        for entry in self.entries:
            entry.bits |= HIDDEN

    def close_implied(self, name: str) -> None:
        """The end tags a start tag implies: a block ends a <p>, an <li> the previous <li>..."""
        counts = self.counts
        if name in el.CLOSES_P and counts.get("p"):
            self.close_in_scope("p", BUTTON_SCOPE)
        if name == "li":
            if counts.get("li"):
                self._close_item(("li",), LISTS)
        elif name == "dd" or name == "dt":
            if counts.get("dd") or counts.get("dt"):
                self._close_item(("dd", "dt"), DEFINITION_LISTS)
        elif name in el.HEADINGS:
            if self.entries and self.entries[-1].name in el.HEADINGS:
                self.pop_to(len(self.entries) - 1)
        elif name == "a":
            if counts.get("a"):
                self.close_in_scope("a", el.SPECIAL)
        elif name in el.CELLS or name == "tr" or name in ("tbody", "thead", "tfoot"):
            self._close_table_parts(name)
        elif (name == "option" or name == "optgroup") and counts.get("option"):
            self.close_in_scope("option", el.SPECIAL)

    def end(self, name: str) -> None:
        """An end tag, by the rules for HTML content."""
        entries = self.entries
        if entries and entries[-1].name == name:
            # The common case: the end tag closes the element just opened.
            self.pop_to(len(entries) - 1)
            return
        if name == "p":
            if not (self.counts.get("p") and self.close_in_scope("p", BUTTON_SCOPE)):
                # A stray </p> is an empty paragraph to a browser: the line ends there.
                self._writer.boundary("\n")
                self._inserted_empty()
            return
        if name in el.VOID or name in ("html", "body", "head"):
            if name == "br":
                # A stray </br> is a <br> to a browser.
                self._writer.line_break()
                self._inserted_empty()
            return
        if not self.counts.get(name):
            return
        if name in el.TABLE_PARTS:
            self.close_in_scope(name, el.TABLE_BOUNDARY, foreign_stops=False)
        else:
            self.close_in_scope(name, el.SCOPE_BOUNDARY if name in el.SPECIAL else el.SPECIAL)

    def _inserted_empty(self) -> None:
        # The empty element is one more child of the current node, which MathML layout counts.
        if self.entries and self.entries[-1].ns & MATH:
            self.entries[-1].children += 1

    def close_in_scope(self, name: str, stops: frozenset[str], *, foreign_stops: bool = True) -> bool:
        """Close the nearest open ``name``, unless one of ``stops`` (or, with ``foreign_stops``, an
        integration point of svg or math) comes first; True when it was closed."""
        entries = self.entries
        lowest = max(-1, len(entries) - 1 - MAX_WALK)
        for index in range(len(entries) - 1, lowest, -1):
            entry = entries[index]
            if entry.name == name:
                self.pop_to(index)
                return True
            if (foreign_stops and entry.ns & SCOPING) if entry.ns else entry.name in stops:
                return False
        return False

    def _close_item(self, names: tuple[str, ...], lists: frozenset[str]) -> None:
        entries = self.entries
        lowest = max(-1, len(entries) - 1 - MAX_WALK)
        for index in range(len(entries) - 1, lowest, -1):
            entry = entries[index]
            found = entry.name
            if found in names:
                self.pop_to(index)
                return
            if entry.ns:
                if entry.ns & SCOPING:
                    return
            elif found in lists or (found in el.SPECIAL and found not in ("address", "div", "p")):
                return

    def _close_table_parts(self, name: str) -> None:
        # A new cell closes the open cell; a new row closes the open row; a new section closes both.
        closes = ("td", "th") if name in el.CELLS else ("td", "th", "tr") if name == "tr" else el.TABLE_PARTS
        entries = self.entries
        lowest = max(-1, len(entries) - 1 - MAX_WALK)
        for index in range(len(entries) - 1, lowest, -1):
            entry = entries[index]
            if entry.ns:
                continue
            if entry.name in closes and entry.name != "table":
                self.pop_to(index)
                return
            if entry.name in el.TABLE_BOUNDARY:
                return
