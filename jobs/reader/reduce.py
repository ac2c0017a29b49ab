"""The streaming reducer: HTML to blocks of readable text on html5lib's tokenizer, never its tree.

html5lib's tree builder is quadratic in nesting depth (20,000 nested divs, about 100 KB, took 35 s
to parse); its tokenizer is linear. So this module runs the tokenizer and keeps only what the text
needs: a stack of open elements with the few tree-construction rules that decide where an element
ends (an implied ``</p>``, ``</li>``, ``</td>``, an svg that a ``<p>`` breaks out of, a template
that never ends), and it switches the tokenizer into the raw-text states itself, since only the
tree builder would (``<script>``, ``<style>``, ``<title>``...).

The output is a sequence of blocks (one per paragraph, heading, list item, table cell...) with the
context each sat in (nav, footer, article, link text...) and the ranges of the block-level elements
that held them, so main-content selection can work on it without ever building a tree. Every walk
down the stack is bounded, so no sequence of tags costs more than linear time; ``run`` works in
slices so the caller can yield to the event loop and stop at a CPU budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from jobs.reader import elements as el
from jobs.reader.hidden import attributes_hide, strip_invisible
from jobs.reader.tokens import CHARACTERS, END_TAG, SPACE_CHARACTERS, START_TAG, StreamingTokenizer

# What an open element does to the text inside it (bits, inherited by everything it contains).
DROP = 1 << 0  # not text at all: script, style, template, svg...
HIDDEN = 1 << 1  # text hidden from a reader: counted in hidden_removed, not kept
TITLE = 1 << 2
PRE = 1 << 3
LINK = 1 << 4
FOREIGN = 1 << 5  # svg or math content outside an integration point
# Where a block sits: the page structure that main-content selection weighs.
NAV = 1 << 8
ASIDE = 1 << 9
FOOTER = 1 << 10
HEADER = 1 << 11
FORM = 1 << 12
MAIN = 1 << 13
ARTICLE = 1 << 14
BOILERPLATE_HINT = 1 << 15
CONTENT_HINT = 1 << 16
CONSENT = 1 << 17
LIST = 1 << 18
TABLE = 1 << 19
HEADING = 1 << 20
QUOTE = 1 << 21
FIGURE = 1 << 22
COMMENTS = 1 << 23
DISCARD_HINT = 1 << 24

_NOT_TEXT = DROP | HIDDEN | TITLE
_ROLE_BITS = {
    "navigation": NAV,
    "menu": NAV,
    "menubar": NAV,
    "banner": HEADER,
    "contentinfo": FOOTER,
    "complementary": ASIDE,
    "search": FORM,
    "form": FORM,
    "main": MAIN,
    "article": ARTICLE,
    "alertdialog": CONSENT,
    "dialog": CONSENT,
}
_NAME_BITS = {
    "nav": NAV,
    "aside": ASIDE,
    "footer": FOOTER,
    "form": FORM,
    "search": FORM,
    "main": MAIN,
    "article": ARTICLE,
    "ul": LIST,
    "ol": LIST,
    "dl": LIST,
    "menu": LIST,
    "table": TABLE,
    "blockquote": QUOTE,
    "figure": FIGURE,
    "h1": HEADING,
    "h2": HEADING,
    "h3": HEADING,
    "h4": HEADING,
    "h5": HEADING,
    "h6": HEADING,
    "pre": PRE,
    "listing": PRE,
    "xmp": PRE,
    "plaintext": PRE,
    "textarea": PRE,
}
_CLOSERS = (
    el.CLOSES_P
    | el.HEADINGS
    | el.CELLS
    | {"li", "dd", "dt", "a", "tr", "tbody", "thead", "tfoot", "option", "optgroup"}
)
_RAW_TEXT = el.RCDATA | el.RAWTEXT | {"script", "plaintext"}
_LISTS = frozenset({"ol", "ul", "menu"})
_DEFINITION_LISTS = frozenset({"dl"})
_BUTTON_SCOPE = el.SCOPE_BOUNDARY | {"button"}
_HINTED = el.BLOCK | el.CELLS | {"span", "section"}
# Walks down the stack (looking for the element an end tag closes) stop after this many levels:
# a hostile page nests deeper only to make each walk quadratic; a real page is far shallower.
_MAX_WALK = 256
# Browsers stop nesting at 512 open elements (deeper ones become siblings, as in Blink); so do we,
# which bounds every pass over the stack, including closing everything at the end.
_MAX_DEPTH = 512
# A page with more blocks than this is not a document a reader reads; it stops there, truncated,
# which bounds the work after reduction (selection, joining) as the CPU budget bounds the rest.
_MAX_BLOCKS = 5_000
# One block is flushed at this size, so no single flush (collapse, invisible scan) stalls the loop.
_MAX_BLOCK_CHARS = 65_536
_MAX_TITLE = 1000
_MAX_HREFS = 5000
_CHECK_EVERY = 8  # tokenizer steps between clock reads


@dataclass(slots=True)
class Block:
    text: str
    sep: str  # what separates it from the previous block: "\n", or "\t" between table cells
    kind: str  # the innermost block element it came from: "p", "h2", "li", "td", "pre", "div"...
    bits: int  # the context bits above when its first text arrived
    link_chars: int  # characters of it inside <a>
    parent: int  # id of the innermost block-level element holding it (0: the document)


@dataclass(slots=True)
class Container:
    """A block-level element: blocks[start:end] are the blocks it holds."""

    start: int
    end: int
    name: str
    depth: int
    bits: int
    id: int
    parent: int  # id of the innermost block-level element around it (0: the document)
    own_bits: int  # the bits it added itself, not inherited


@dataclass
class Reduction:
    blocks: list[Block]
    containers: list[Container]
    title: str
    hrefs: list[str]  # distinct raw href values of visible links, in page order
    base_href: str | None
    hidden_removed: int
    complete: bool  # False when stopped early: the CPU budget, or the block cap


@dataclass(slots=True)
class _Open:
    name: str
    bits: int
    kind: str
    start: int  # index of the first block inside it
    depth: int
    block_id: int  # its own id when it is block-level, else its block-level ancestor's
    parent_id: int


class Reducer:
    """One document's reduction: ``run`` it until it says done (or the budget says stop), then
    take its ``result``."""

    def __init__(self, html: str) -> None:
        self._tokenizer = StreamingTokenizer(html)
        self._stack: list[_Open] = []
        self._counts: dict[str, int] = {}
        self._root_bits = 0
        self._bits = 0
        self._kind = "body"
        self._block_id = 0
        self._next_id = 1
        self._block_parent = 0
        self._blocks: list[Block] = []
        self._containers: list[Container] = []
        self._pieces: list[str] = []
        self._lines: list[str] = []
        self._block_bits = 0
        self._block_kind = "body"
        self._block_sep = "\n"
        self._link_chars = 0
        self._pending = "\n"
        self._title: list[str] | None = None
        self._title_len = 0
        self._hrefs: list[str] = []
        self._href_seen: set[str] = set()
        self._base_href: str | None = None
        self._hidden = 0
        self._hint_cache: dict[str, int] = {}
        self._finished = False
        self._complete = False
        self._full = False
        self._pending_chars = 0

    def run(self, seconds: float) -> bool:
        """Reduce for about ``seconds`` of work; True once the whole document is reduced."""
        if self._finished:
            return True
        tokenizer = self._tokenizer
        queue = tokenizer.tokenQueue
        clock = time.perf_counter
        deadline = clock() + seconds
        steps = 0
        text, space, start, end = self._text, self._space, self._start, self._end
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
            if self._full:
                self.finish()
                return True
            steps += 1
            if steps % _CHECK_EVERY == 0 and clock() >= deadline:
                return False

    def finish(self) -> None:
        """Close whatever is open, as the end of the document does; safe to call more than once."""
        if self._finished:
            return
        self._pop_to(0)
        self._flush()
        self._finished = True

    def result(self) -> Reduction:
        title, invisible = strip_invisible("".join(self._title or ()))
        title = " ".join(title.split())
        return Reduction(
            blocks=self._blocks,
            containers=self._containers,
            title=title[:_MAX_TITLE],
            hrefs=self._hrefs,
            base_href=self._base_href,
            hidden_removed=self._hidden + invisible,
            complete=self._complete,
        )

    # Text -----------------------------------------------------------------------------------

    def _text(self, data: str) -> None:
        bits = self._bits
        if bits & _NOT_TEXT:
            if bits & DROP:
                return
            if bits & TITLE:
                self._title_text(data)
            else:
                self._hidden += len(" ".join(data.split()))
            return
        if not self._pieces and not self._lines:
            self._open_block(bits)
        self._pieces.append(data)
        if bits & LINK:
            self._link_chars += len(" ".join(data.split()))
        self._pending_chars += len(data)
        if self._pending_chars > _MAX_BLOCK_CHARS:
            self._flush()

    def _space(self, data: str) -> None:
        bits = self._bits
        if bits & _NOT_TEXT:
            if bits & TITLE and not bits & DROP:
                self._title_text(" ")
            return
        if bits & PRE:
            if not self._pieces and not self._lines:
                self._open_block(bits)
            self._pieces.append(data)
            self._pending_chars += len(data)
            if self._pending_chars > _MAX_BLOCK_CHARS:
                self._flush()
        elif self._pieces:
            self._pieces.append(" ")

    def _open_block(self, bits: int) -> None:
        self._block_bits = bits
        self._block_kind = self._kind
        self._block_parent = self._block_id
        self._block_sep = self._pending
        self._pending = ""
        self._link_chars = 0

    def _title_text(self, data: str) -> None:
        if self._title is not None and self._title_len < 4 * _MAX_TITLE:
            self._title.append(data)
            self._title_len += len(data)

    def _line_break(self) -> None:
        if self._bits & _NOT_TEXT:
            return
        if self._pieces:
            self._lines.append("".join(self._pieces))
            self._pieces = []
        elif self._lines:
            self._lines.append("")

    def _boundary(self, sep: str) -> None:
        if self._pieces or self._lines:
            self._flush()
        if sep == "\n" or not self._pending:
            self._pending = sep

    def _flush(self) -> None:
        self._pending_chars = 0
        if self._pieces:
            self._lines.append("".join(self._pieces))
            self._pieces = []
        if not self._lines:
            return
        lines = self._lines
        self._lines = []
        cleaned: list[str] = []
        for line in lines:
            line, invisible = strip_invisible(line)
            self._hidden += invisible
            cleaned.append(line)
        if self._block_bits & PRE:
            text = "\n".join(cleaned)
            text = (text[1:] if text.startswith("\n") else text).rstrip()
        else:
            # Whitespace collapses within a line; a <br> is a line of its own.
            text = "\n".join(line for line in (" ".join(part.split()) for part in cleaned) if line)
        if not text:
            if not self._pending:
                self._pending = self._block_sep
            return
        if len(self._blocks) >= _MAX_BLOCKS:
            self._full = True
            return
        self._blocks.append(
            Block(
                text,
                self._block_sep or "\n",
                self._block_kind,
                self._block_bits,
                self._link_chars,
                self._block_parent,
            )
        )

    # Tags -----------------------------------------------------------------------------------

    def _start(self, name: str, attrs: dict[str, str], self_closing: bool) -> None:
        bits = self._bits
        if bits & FOREIGN:
            if name in el.BREAKOUT or (
                name == "font" and ("color" in attrs or "face" in attrs or "size" in attrs)
            ):
                self._close_foreign()
                bits = self._bits
            else:
                if not self_closing:
                    own = bits & ~FOREIGN if name in el.INTEGRATION_POINTS else bits
                    self._push(name, own, self._kind, False)
                return
        if name in el.VOID:
            self._void(name, attrs)
            return
        if name in ("html", "body", "head"):
            if name != "head" and attrs and attributes_hide(attrs):
                self._hide_root()
            return
        if name in _CLOSERS:
            self._close_implied(name)
        if name in _RAW_TEXT:
            self._switch_tokenizer(name)
        bits = self._bits
        own = bits | _NAME_BITS.get(name, 0)
        if name in el.DROPPED:
            own |= DROP
            if name in el.FOREIGN_ROOTS:
                own |= FOREIGN
        elif name == "title":
            if self._title is None and not bits & (DROP | HIDDEN):
                self._title = []
                own |= TITLE
            else:
                own |= DROP
        if name == "header" and not own & (ARTICLE | MAIN):
            own |= HEADER
        if attrs and not own & DROP:
            own = self._attribute_bits(name, attrs, own)
        if name == "dialog" and "open" not in attrs:
            own |= HIDDEN
        kind = self._kind
        if name in el.BLOCK:
            self._boundary("\n")
            kind = name
        elif name in el.CELLS:
            self._boundary("\t")
            kind = name
        self._push(name, own, kind, kind is name)

    def _close_implied(self, name: str) -> None:
        """The end tags a start tag implies: a block ends a <p>, an <li> the previous <li>..."""
        counts = self._counts
        if name in el.CLOSES_P and counts.get("p"):
            self._close_in_scope("p", _BUTTON_SCOPE)
        if name == "li":
            if counts.get("li"):
                self._close_item(("li",), _LISTS)
        elif name == "dd" or name == "dt":
            if counts.get("dd") or counts.get("dt"):
                self._close_item(("dd", "dt"), _DEFINITION_LISTS)
        elif name in el.HEADINGS:
            if self._stack and self._stack[-1].name in el.HEADINGS:
                self._pop_to(len(self._stack) - 1)
        elif name == "a":
            if counts.get("a"):
                self._close_in_scope("a", el.SPECIAL)
        elif name in el.CELLS or name == "tr" or name in ("tbody", "thead", "tfoot"):
            self._close_table_parts(name)
        elif (name == "option" or name == "optgroup") and counts.get("option"):
            self._close_in_scope("option", el.SPECIAL)

    def _attribute_bits(self, name: str, attrs: dict[str, str], own: int) -> int:
        if attributes_hide(attrs):
            own |= HIDDEN
        if name == "a":
            href = attrs.get("href")
            if href is not None:
                own |= LINK
                if not own & (HIDDEN | DROP):
                    self._add_href(href)
        role = attrs.get("role")
        if role:
            own |= _ROLE_BITS.get(role.strip().lower(), 0)
        if attrs.get("itemprop", "").lower() == "articlebody":
            own |= CONTENT_HINT
        if name in _HINTED:
            names = attrs.get("class", "") + " " + attrs.get("id", "")
            if len(names) > 1:
                hint = self._hint_cache.get(names)
                if hint is None:
                    hint = _hint_bits(names)
                    self._hint_cache[names] = hint
                own |= hint
        return own

    def _void(self, name: str, attrs: dict[str, str]) -> None:
        if name == "br":
            self._line_break()
        elif name == "hr":
            self._boundary("\n")
        elif name == "area":
            href = attrs.get("href")
            if href is not None and not self._bits & (HIDDEN | DROP) and not attributes_hide(attrs):
                self._add_href(href)
        elif name == "base" and self._base_href is None and "href" in attrs:
            self._base_href = attrs["href"]

    def _add_href(self, href: str) -> None:
        if href not in self._href_seen and len(self._hrefs) < _MAX_HREFS:
            self._href_seen.add(href)
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

    def _hide_root(self) -> None:
        self._root_bits |= HIDDEN
        self._bits |= HIDDEN
        for entry in self._stack:
            entry.bits |= HIDDEN

    def _push(self, name: str, bits: int, kind: str, block_level: bool) -> None:
        if len(self._stack) >= _MAX_DEPTH:
            self._pop_to(len(self._stack) - 1)
        parent_id = self._block_id
        block_id = parent_id
        if block_level:
            block_id = self._next_id
            self._next_id += 1
        self._stack.append(_Open(name, bits, kind, len(self._blocks), len(self._stack), block_id, parent_id))
        self._counts[name] = self._counts.get(name, 0) + 1
        self._bits = bits
        self._kind = kind
        self._block_id = block_id

    def _end(self, name: str) -> None:
        stack = self._stack
        if stack and stack[-1].name == name:
            # The common case: the end tag closes the element just opened.
            self._pop_to(len(stack) - 1)
            return
        if name in el.VOID or name in ("html", "body", "head"):
            if name == "br":
                self._line_break()
            return
        if not self._counts.get(name):
            if name == "p":
                self._boundary("\n")
            return
        if name in el.TABLE_PARTS:
            stops = el.TABLE_BOUNDARY
        elif name in el.SPECIAL:
            stops = el.SCOPE_BOUNDARY
        else:
            stops = el.SPECIAL
        self._close_in_scope(name, stops)

    def _close_in_scope(self, name: str, stops: frozenset[str]) -> None:
        stack = self._stack
        lowest = max(-1, len(stack) - 1 - _MAX_WALK)
        for index in range(len(stack) - 1, lowest, -1):
            found = stack[index].name
            if found == name:
                self._pop_to(index)
                return
            if found in stops:
                return

    def _close_item(self, names: tuple[str, ...], lists: frozenset[str]) -> None:
        stack = self._stack
        lowest = max(-1, len(stack) - 1 - _MAX_WALK)
        for index in range(len(stack) - 1, lowest, -1):
            found = stack[index].name
            if found in names:
                self._pop_to(index)
                return
            if found in lists or (found in el.SPECIAL and found not in ("address", "div", "p")):
                return

    def _close_table_parts(self, name: str) -> None:
        # A new cell closes the open cell; a new row closes the open row; a new section closes both.
        closes = ("td", "th") if name in el.CELLS else ("td", "th", "tr") if name == "tr" else el.TABLE_PARTS
        stack = self._stack
        lowest = max(-1, len(stack) - 1 - _MAX_WALK)
        for index in range(len(stack) - 1, lowest, -1):
            found = stack[index].name
            if found in closes and found != "table":
                self._pop_to(index)
                return
            if found in el.TABLE_BOUNDARY:
                return

    def _close_foreign(self) -> None:
        stack = self._stack
        while stack and stack[-1].bits & FOREIGN:
            self._pop_to(len(stack) - 1)

    def _pop_to(self, index: int) -> None:
        stack = self._stack
        counts = self._counts
        while len(stack) > index:
            entry = stack.pop()
            name = entry.name
            counts[name] -= 1
            if name in el.BLOCK:
                self._boundary("\n")
            elif name in el.CELLS:
                self._boundary("\t")
            if entry.block_id != entry.parent_id and len(self._blocks) > entry.start:
                parent_bits = stack[-1].bits if stack else self._root_bits
                self._containers.append(
                    Container(
                        entry.start,
                        len(self._blocks),
                        name,
                        entry.depth,
                        entry.bits,
                        entry.block_id,
                        entry.parent_id,
                        entry.bits & ~parent_bits,
                    )
                )
            if stack:
                top = stack[-1]
                self._bits = top.bits
                self._kind = top.kind
                self._block_id = top.block_id
            else:
                self._bits = self._root_bits
                self._kind = "body"
                self._block_id = 0


def _hint_bits(names: str) -> int:
    lowered = names.lower()
    bits = 0
    boilerplate = el.BOILERPLATE_WORDS.search(lowered) is not None
    content = el.CONTENT_WORDS.search(lowered) is not None
    if boilerplate and not content:
        bits |= BOILERPLATE_HINT
    elif content and not boilerplate:
        bits |= CONTENT_HINT
    if el.CONSENT_WORDS.search(lowered):
        bits |= CONSENT
    if el.COMMENT_WORDS.search(lowered):
        bits |= COMMENTS
    if el.DISCARD_PARTS.search(lowered):
        bits |= DISCARD_HINT
    return bits


def reduce_all(html: str) -> Reduction:
    """The whole document in one call (tests, benchmarks): no budget, no yielding."""
    reducer = Reducer(html)
    while not reducer.run(3600.0):
        pass
    return reducer.result()
