"""Block assembly: the text the reducer meets, gathered into blocks of readable text.

A block is what a reader sees as one unit (a paragraph, a heading, a list item, a table cell),
with the context it sat in. Whitespace collapses inside a line, a ``<br>`` starts a new line,
``<pre>`` keeps its whitespace, and invisible characters are stripped as the text arrives, a few
thousand characters at a time, so no single step costs more than a few milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.reader.hidden import InvisibleStripper, strip_invisible
from jobs.reader.html.structure import Frame
from jobs.reader.html.vocabulary import CODE, DROP, LINK, NOT_TEXT, PRE, TITLE

# A page with more blocks than this stops there, truncated, which bounds the work after reduction
# (selection, joining) as the CPU budget bounds the rest; a 2 MiB page of short paragraphs has about
# 40,000, and its whole text is kept for reading by pieces.
MAX_BLOCKS = 50_000
# One block is flushed at this size, so no single flush (collapsing whitespace) stalls the loop.
MAX_BLOCK_CHARS = 65_536
# Raw text is handed to the invisible-character stripper in runs of about this many characters:
# a run of letters and zero-width joiners costs about a microsecond a pair to judge.
STRIP_EVERY = 8_192
MAX_TITLE = 1000
MAX_ALT = 300  # characters of an image's alt text that Markdown shows
MAX_PENDING_ALTS = 32  # images in a row outside any text (a gallery) whose alt text is kept
# A chunk of a line's text that only Markdown shows, as an image (an image's alt text), never the
# plain text.
EXTRA = -2

# A run of a line's text in Markdown: its words (whitespace collapsed as in the plain text) and
# the link they are the text of: twice the href's index in the reduction's hrefs, plus one for
# every other <a> (so two links in a row to one href stay two), or -1 for none; EXTRA for the alt
# text of an image.
Run = tuple[str, int]


@dataclass(slots=True)
class Block:
    text: str
    sep: str  # what separates it from the previous block: "\n", or "\t" between table cells
    kind: str  # the innermost block element it came from: "p", "h2", "li", "td", "pre", "div"...
    bits: int  # the context bits when its first text arrived
    link_chars: int  # characters of it inside <a>
    parent: int  # id of the innermost block-level element holding it (0: the document)
    frame: Frame | None = None  # the innermost list, item, quote or table part around it
    # Its lines as runs, when some of its text is a link's or an image's alt text (else None:
    # the text is one plain run per line).
    runs: tuple[tuple[Run, ...], ...] | None = None
    code: bool = False  # all of its text was inside <code>: Markdown shows it as code


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
    boxes: int = 0  # places to write inside it (<textarea>): a reply form, a contact form


@dataclass(slots=True)
class Context:
    """Where text goes now: the innermost open element's bits and block kind, and the id of the
    innermost block-level element. The open-element stack keeps it current."""

    bits: int = 0
    kind: str = "body"
    block_id: int = 0
    frame: Frame | None = None
    link: int = -1


class BlockWriter:
    def __init__(self, context: Context) -> None:
        self._at = context
        self.blocks: list[Block] = []
        self.containers: list[Container] = []
        # Images that stood apart from any text, as blocks with no plain text whose Markdown is
        # their alt text, each with the index of the block it stands before. They are kept apart
        # from the blocks so that choosing the main content never sees them.
        self.pictures: list[tuple[int, Block]] = []
        self.hidden = 0  # characters of hidden text and invisible characters dropped
        self.full = False  # MAX_BLOCKS reached: the reduction stops
        self._pieces: list[str] = []  # raw text of the current line, not yet stripped
        self._raw = 0  # characters in _pieces
        self._line: list[str] = []  # stripped text of the current line
        self._lines: list[str] = []  # finished lines of the current block
        self._stripper = InvisibleStripper()
        self._open = False  # a block has started (text arrived since the last flush)
        self._unflushed = 0  # raw characters since the last flush
        self._block_bits = 0
        self._block_kind = "body"
        self._block_sep = "\n"
        self._block_parent = 0
        self._link_chars = 0
        self._pending = "\n"
        self._title: list[str] | None = None
        self._title_len = 0
        # What Markdown needs beside the text: the link of each stripped chunk of the current
        # line, the chunks of the block's lines that hold a link or an alt text, and whether any
        # of the block's text was outside <code>.
        self._link = -1  # the link of the text in _pieces
        self._links: list[int] = []  # parallel to _line
        self._marked_line = False
        self._extra_line = False
        self._marked: dict[int, tuple[list[str], list[int]]] = {}  # by index in _lines
        self._block_frame: Frame | None = None
        self._outside_code = False
        # Alt texts of images met outside any text so far: they join the next text of the same
        # line, or become a block of their own at the next boundary.
        self._pending_alts: list[tuple[str, int, int, str, Frame | None]] = []

    def text(self, data: str) -> None:
        bits = self._at.bits
        if bits & NOT_TEXT:
            if bits & DROP:
                return
            if bits & TITLE:
                self.title_text(data)
            else:
                self.hidden += len(" ".join(data.split()))
                if self._open and (data[0].isspace() or data[-1].isspace()):
                    # Hidden text that stood between words (a screen-reader-only ": ") still
                    # separates them: the boxes around it are apart on the screen.
                    self._pieces.append(" ")
            return
        if not self._open:
            self._open_block(bits)
        if bits & LINK:
            self._link_chars += len(" ".join(data.split()))
        if not bits & CODE:
            self._outside_code = True
        link = self._at.link
        if link != self._link:
            self._switch_link(link)
        self._add(data)

    def space(self, data: str) -> None:
        bits = self._at.bits
        if bits & NOT_TEXT:
            if bits & TITLE and not bits & DROP:
                self.title_text(" ")
            return
        if bits & PRE:
            if not self._open:
                self._open_block(bits)
            self._add(data)
        elif self._pieces or self._line:
            self._pieces.append(" ")

    def line_break(self) -> None:
        if self._at.bits & NOT_TEXT:
            return
        if self._pieces or self._line:
            self._end_line()
        elif self._lines:
            self._lines.append("")

    def alt_text(self, alt: str) -> None:
        """An image's alt text, which Markdown shows where the image stands (the plain text never
        did, and does not)."""
        if self._at.bits & NOT_TEXT:
            return
        text = " ".join(strip_invisible(alt[: 4 * MAX_ALT])[0].split())[:MAX_ALT]
        if not text:
            return
        if self._open:
            self._extra(text)
        elif len(self._pending_alts) < MAX_PENDING_ALTS:
            at = self._at
            self._pending_alts.append((text, at.block_id, at.bits, at.kind, at.frame))

    def boundary(self, sep: str) -> None:
        """A block-level element starts or ends here (``sep`` "\\n"), or a table cell ("\\t")."""
        if self._open:
            self.flush()
        if self._pending_alts:
            self._alt_block()
        if sep == "\n" or not self._pending:
            self._pending = sep

    def _alt_block(self) -> None:
        """Images that stood apart from any text (alone in a paragraph, a figure, a linked
        picture): a picture, a block with no plain text whose Markdown is their alt text."""
        alts = self._pending_alts
        self._pending_alts = []
        if len(self.pictures) >= MAX_BLOCKS:
            return
        _, parent, bits, kind, frame = alts[0]
        runs: list[Run] = []
        for alt, *_ in alts:
            runs.extend(((" ", -1), (alt, EXTRA)) if runs else ((alt, EXTRA),))
        picture = Block("", "\n", kind, bits, 0, parent, frame, (tuple(runs),))
        self.pictures.append((len(self.blocks), picture))

    def start_title(self) -> None:
        self._title = []

    @property
    def has_title(self) -> bool:
        return self._title is not None

    def title_text(self, data: str) -> None:
        if self._title is not None and self._title_len < 4 * MAX_TITLE:
            self._title.append(data)
            self._title_len += len(data)

    def title(self) -> tuple[str, int]:
        """The title, whitespace collapsed and cut, and the invisible characters removed from it."""
        stripper = InvisibleStripper()
        title = stripper.feed("".join(self._title or ()))
        stripper.finish()
        return " ".join(title.split())[:MAX_TITLE], stripper.removed

    def record(self, container: Container) -> None:
        self.containers.append(container)

    def discard_from(self, blocks: int, containers: int) -> None:
        """Drop what was recorded since there were ``blocks`` blocks and ``containers`` containers
        (the option of a drop-down that turned out not to be the one it shows)."""
        del self.blocks[blocks:]
        del self.containers[containers:]
        while self.pictures and self.pictures[-1][0] > blocks:
            self.pictures.pop()

    def flush(self) -> None:
        """End the current block: its lines, cleaned and collapsed, become one Block."""
        self._unflushed = 0
        if not self._open:
            return
        self._open = False
        if self._pieces or self._line:
            self._end_line()
        lines = self._lines
        self._lines = []
        marked = self._marked
        runs = None
        if self._block_bits & PRE:
            text = "\n".join(lines)
            text = (text[1:] if text.startswith("\n") else text).rstrip()
        else:
            # Whitespace collapses within a line; a <br> is a line of its own.
            text = "\n".join(line for line in (" ".join(part.split()) for part in lines) if line)
            if marked:
                runs = _line_runs(lines, marked)
        if marked:
            self._marked = {}
        if not text:
            if not self._pending:
                self._pending = self._block_sep
            return
        if len(self.blocks) >= MAX_BLOCKS:
            self.full = True
            return
        self.blocks.append(
            Block(
                text,
                self._block_sep or "\n",
                self._block_kind,
                self._block_bits,
                self._link_chars,
                self._block_parent,
                self._block_frame,
                runs,
                bool(self._block_bits & CODE) and not self._outside_code,
            )
        )

    def _open_block(self, bits: int) -> None:
        at = self._at
        self._open = True
        self._block_bits = bits
        self._block_kind = at.kind
        self._block_parent = at.block_id
        self._block_sep = self._pending
        self._pending = ""
        self._link_chars = 0
        self._block_frame = at.frame
        self._outside_code = False
        self._marked_line = self._link >= 0
        if self._pending_alts:
            alts = self._pending_alts
            self._pending_alts = []
            for alt, *_ in alts:
                self._extra(alt)

    def _switch_link(self, link: int) -> None:
        # The text so far is stripped into a chunk of its own, so each chunk has one link.
        if self._pieces:
            self._strip()
        self._link = link
        if link >= 0:
            self._marked_line = True

    def _extra(self, text: str) -> None:
        if self._pieces:
            self._strip()
        # Spaced, since the picture stood apart from the words around it.
        self._line.append(f" {text} ")
        self._links.append(EXTRA)
        self._marked_line = self._extra_line = True

    def _add(self, data: str) -> None:
        self._pieces.append(data)
        self._raw += len(data)
        self._unflushed += len(data)
        if self._unflushed > MAX_BLOCK_CHARS:
            self.flush()
        elif self._raw > STRIP_EVERY:
            self._strip()

    def _strip(self) -> None:
        raw = "".join(self._pieces)
        self._pieces = []
        self._raw = 0
        self._line.append(self._stripper.feed(raw))
        self._links.append(self._link)

    def _end_line(self) -> None:
        if self._pieces:
            self._strip()
        self._stripper.finish()
        self.hidden += self._stripper.removed
        self._stripper = InvisibleStripper()
        line, links = self._line, self._links
        if self._extra_line:
            shown = (chunk for chunk, link in zip(line, links, strict=True) if link != EXTRA)
            self._lines.append("".join(shown))
        else:
            self._lines.append("".join(line))
        if self._marked_line:
            self._marked[len(self._lines) - 1] = (line, links)
        self._line = []
        self._links = []
        self._marked_line = self._link >= 0
        self._extra_line = False


def _line_runs(
    lines: list[str], marked: dict[int, tuple[list[str], list[int]]]
) -> tuple[tuple[Run, ...], ...]:
    """The block's lines as runs, each line collapsed exactly as the plain text collapses it."""
    runs: list[tuple[Run, ...]] = []
    for index, line in enumerate(lines):
        chunks = marked.get(index)
        if chunks is None:
            text = " ".join(line.split())
            if text:
                runs.append(((text, -1),))
            continue
        collapsed = _collapsed(*chunks)
        if collapsed:
            runs.append(collapsed)
    return tuple(runs)


def _collapsed(chunks: list[str], links: list[int]) -> tuple[Run, ...]:
    """``" ".join("".join(chunks).split())`` in runs of one link each; a space between two runs
    belongs to neither link."""
    texts: list[str] = []
    owners: list[int] = []
    spaced = False
    for chunk, link in zip(chunks, links, strict=True):
        words = chunk.split()
        if not words:
            spaced = spaced or bool(chunk)
            continue
        if texts and (spaced or chunk[0].isspace()):
            if owners[-1] == -1:
                texts[-1] += " "
            else:
                texts.append(" ")
                owners.append(-1)
        owner = link
        text = " ".join(words)
        if texts and owners[-1] == owner and owner != EXTRA:
            texts[-1] += text
        else:
            texts.append(text)
            owners.append(owner)
        spaced = chunk[-1].isspace()
    return tuple(zip(texts, owners, strict=True))
