"""Blocks to Markdown: CommonMark with GitHub tables, the structure the reducer recorded and the
page's text escaped (markdown_escape.py), so the structure is ours and the text is the page's.

What each block becomes (docs/reader.md tells it for people):

- a heading: an ATX heading at its level; a paragraph (or any other block): its lines, joined by
  hard line breaks where the page had ``<br>``;
- ``<pre>`` (and a block that is all ``<code>``): a fenced code block, its text as it is;
- list items: ``-`` (or ``*``, alternating between sibling lists so two lists stay two) and
  ``1.`` (``1)`` alternating) numbered from the list's ``start``, nested by indentation;
  block quotes: ``>`` as deep as they nest;
- a table: a pipe table whose first row is the header, every cell's blocks flattened to one line,
  a ``colspan`` written as empty cells after its own, every row as wide as the widest; a table of
  one column, or one whose cells hold headings or many blocks (a page laid out in a table), is
  read as the blocks it holds;
- a link whose href is among the page's links (canonical https): ``[text][n]``, a reference to
  the n-th of the result's ``links`` (from 1), which carries the URL once for every mention; no
  definitions are written (``references`` writes them for a renderer). Any other link is its
  text; an image: ``![alt]()``, its alt text as an image with no source.

Blocks are separated by a blank line (inside a quote, a ``>`` line, so the quote goes on).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from jobs.reader import markdown_escape as escape
from jobs.reader.html.blocks import EXTRA, Block
from jobs.reader.html.structure import CELL, ITEM, LIST, QUOTE, TABLE, Frame
from jobs.reader.html.vocabulary import PRE

HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
# Blocks whose structure says more than their <code> does: an item, a cell, a heading of code
# stays one, its text written as text.
KEEPS_ITS_KIND = frozenset({"li", "dt", "dd", "td", "th", *HEADINGS})
MAX_COLUMNS = 64  # a row's cells past this many are joined into its last one
LAYOUT_CELL_BLOCKS = 5  # a cell with more blocks than this is a page's layout, not data


def render(blocks: Sequence[Block], targets: Mapping[int, int]) -> str:
    """The blocks as Markdown; ``targets`` maps a link (an index into the reduction's hrefs) to
    its number, its place (from 1) in the result's ``links``."""
    return "".join(pieces(blocks, targets))


def references(links: Sequence[str]) -> str:
    """The reference definitions that resolve a result's ``[text][n]`` links, for a renderer:
    appended after a blank line, they make the Markdown's links point at their URLs."""
    return "\n".join(f"[{number}]: {escape.destination(link)}" for number, link in enumerate(links, 1))


def pieces(blocks: Sequence[Block], targets: Mapping[int, int]) -> Iterator[str]:
    """``render`` a unit (a block, a table) at a time, so a caller can pause between them."""
    return _Renderer(blocks, targets).pieces()


class _Renderer:
    def __init__(self, blocks: Sequence[Block], targets: Mapping[int, int]) -> None:
        self._blocks = blocks
        self._targets = targets
        self._layout = _layout_tables(blocks)
        self._item_width: dict[int, int] = {}  # list items already started, by frame id
        self._numbers: dict[int, int] = {}  # the next number of each ordered list
        self._style: dict[int, int] = {}  # each list's marker style (0 or 1)
        # The style of the last list begun in each container (by the ids of the frames around
        # it): the next list there takes the other style, so two lists in a row stay two.
        self._last_style: dict[tuple[int, ...], int] = {}

    def pieces(self) -> Iterator[str]:
        blocks = self._blocks
        previous: list[Frame] | None = None
        index = 0
        while index < len(blocks):
            path, table = self._path(blocks[index])
            if table is None:
                lines = self._block_lines(blocks[index], path)
                index += 1
            else:
                end = index + 1
                while end < len(blocks) and _inside(blocks[end], table):
                    end += 1
                lines = self._table_lines(blocks[index:end], table, path)
                index = end
            if previous is not None:
                if previous and path:
                    yield "\n" + self._continuation(_common(previous, path)).rstrip() + "\n"
                else:
                    yield "\n\n"
            yield self._prefixed(lines, path)
            previous = path

    def _path(self, block: Block) -> tuple[list[Frame], Frame | None]:
        """The frames that shape the block's prefix, and the data table it is a cell of (None:
        it is no table's cell). Frames inside a data table are flattened into its cells, and the
        frames of layout tables say nothing."""
        path: list[Frame] = []
        if block.frame is None:
            return path, None
        for frame in block.frame.path():
            if frame.table in self._layout or (frame.kind == TABLE and frame.id in self._layout):
                continue
            if frame.kind == TABLE:
                return path, frame
            if frame.kind in (LIST, ITEM, QUOTE):
                path.append(frame)
        return path, None

    def _prefixed(self, lines: list[str], path: list[Frame]) -> str:
        if not path:
            return "\n".join(lines)
        first = self._first_prefix(path)
        rest = self._continuation(path)
        out = [first + lines[0]]
        out.extend(rest + line if line else rest.rstrip() for line in lines[1:])
        return "\n".join(out)

    def _first_prefix(self, path: list[Frame]) -> str:
        parts: list[str] = []
        current_list: Frame | None = None
        for position, frame in enumerate(path):
            if frame.kind == QUOTE:
                parts.append("> ")
            elif frame.kind == LIST:
                current_list = frame
                if frame.id not in self._style:
                    around = tuple(outer.id for outer in path[:position])
                    style = self._style[frame.id] = 1 - self._last_style.get(around, 1)
                    self._last_style[around] = style
            elif frame.kind == ITEM:
                width = self._item_width.get(frame.id)
                if width is None:
                    marker = self._marker(current_list)
                    self._item_width[frame.id] = len(marker)
                    parts.append(marker)
                else:
                    parts.append(" " * width)
        return "".join(parts)

    def _continuation(self, path: list[Frame]) -> str:
        parts: list[str] = []
        for frame in path:
            if frame.kind == QUOTE:
                parts.append("> ")
            elif frame.kind == ITEM:
                parts.append(" " * self._item_width.get(frame.id, 2))
        return "".join(parts)

    def _marker(self, frame: Frame | None) -> str:
        if frame is None:
            return "- "
        style = self._style.get(frame.id, 0)
        if not frame.ordered:
            return "* " if style else "- "
        number = self._numbers.get(frame.id, frame.start)
        self._numbers[frame.id] = min(number + 1, 999_999_999)
        return f"{number}{')' if style else '.'} "

    def _block_lines(self, block: Block, path: list[Frame]) -> list[str]:
        if block.bits & PRE or (block.code and block.kind not in KEEPS_ITS_KIND):
            return _code(block.text)
        level = HEADINGS.get(block.kind)
        if level is not None:
            return ["#" * level + " " + " ".join(self._lines(block, heading=True))]
        lines = self._lines(block, heading=False)
        # A hard line break: a backslash at the end of every line but the last.
        return [line + "\\" for line in lines[:-1]] + lines[-1:]

    def _lines(self, block: Block, *, heading: bool) -> list[str]:
        """The block's lines, escaped, with the links that have a target written as links."""
        if block.runs is None:
            if heading:
                return [escape.heading(line) for line in block.text.split("\n")]
            return [escape.line(line) for line in block.text.split("\n")]
        lines: list[str] = []
        for runs in block.runs:
            parts: list[str] = []
            for text, link in runs:
                if link == EXTRA:
                    # An image as an image: its alt text, and no source (it costs the agent
                    # characters and shows it nothing). Renderers show the alt text in its place.
                    parts.append(f"![{escape.heading(text) if heading else escape.inline(text)}]()")
                    continue
                written = escape.heading(text) if heading else escape.inline(text)
                number = self._targets.get(link >> 1) if link >= 0 else None
                if number is not None and text.strip():
                    written = f"[{written}][{number}]"
                    if parts and parts[-1].endswith("!"):
                        parts[-1] = parts[-1][:-1] + "\\!"  # "!" before a link makes it an image
                parts.append(written)
            assembled = "".join(parts)
            lines.append(assembled if heading else escape.line_start(assembled))
        return lines or [""]

    def _table_lines(self, blocks: Sequence[Block], table: Frame, path: list[Frame]) -> list[str]:
        """A pipe table; text inside the table but in no cell (a caption) comes first, as lines."""
        loose: list[str] = []
        rows: dict[int, dict[int, list[str]]] = {}  # row -> column -> the texts of its cell
        spans: dict[tuple[int, int], int] = {}
        for block in blocks:
            cell = _cell_of(block, table)
            if block.bits & PRE or block.code:
                text = escape.inline(" ".join(block.text.split()))
            else:
                text = " ".join(self._lines(block, heading=False))
            if cell is None:
                loose.append(text)
                continue
            key = cell.row or cell.table
            column = min(cell.column, MAX_COLUMNS - 1)
            rows.setdefault(key, {}).setdefault(column, []).append(text)
            spans[key, column] = cell.colspan
        lines = [line for text in loose for line in (text, "")]
        if not rows:
            return lines[:-1] if lines else [""]
        table_rows = [
            _cells(row, {column: spans[key, column] for column in row}) for key, row in rows.items()
        ]
        width = max(len(cells) for cells in table_rows)
        for position, cells in enumerate(table_rows):
            cells = cells + [""] * (width - len(cells))
            lines.append("| " + " | ".join(cells) + " |")
            if position == 0:
                lines.append("|" + " --- |" * width)
        return lines


def _cells(row: dict[int, list[str]], spans: dict[int, int]) -> list[str]:
    """A row's cells by column: an empty cell (which held no text) is an empty column, and a
    colspan is its text followed by empty columns."""
    cells: list[str] = []
    for column in sorted(row):
        cells.extend([""] * (column - len(cells)))
        # A cell's line breaks and blocks are one line: a pipe table's row is one line.
        text = " ".join(" ".join(row[column]).split())
        if len(cells) > column:
            cells[column] = f"{cells[column]} {text}".strip()  # past MAX_COLUMNS: joined into the last
            continue
        cells.append(text)
        cells.extend([""] * (min(column + spans[column], MAX_COLUMNS) - len(cells)))
    return cells


def _code(text: str) -> list[str]:
    fence = escape.fence(text)
    return [fence, *text.split("\n"), fence]


def _inside(block: Block, table: Frame) -> bool:
    frame = block.frame
    while frame is not None:
        if frame is table:
            return True
        frame = frame.parent
    return False


def _cell_of(block: Block, table: Frame) -> Frame | None:
    """The cell of ``table`` that holds the block (the outermost cell below the table)."""
    cell: Frame | None = None
    frame = block.frame
    while frame is not None and frame is not table:
        if frame.kind == CELL and frame.table == table.id:
            cell = frame
        frame = frame.parent
    return cell


def _common(previous: list[Frame], path: list[Frame]) -> list[Frame]:
    common: list[Frame] = []
    for before, now in zip(previous, path, strict=False):
        if before is not now:
            break
        common.append(before)
    return common


def _layout_tables(blocks: Sequence[Block]) -> set[int]:
    """The tables that lay a page out rather than hold data: one column at most, or a cell that
    holds a heading or more than a few blocks. Their blocks are read as blocks."""
    widths: dict[int, dict[int, int]] = {}  # table -> row -> columns
    seen: set[int] = set()
    cell_blocks: dict[int, int] = {}
    layout: set[int] = set()
    tables: set[int] = set()
    for block in blocks:
        frame = block.frame
        while frame is not None:
            if frame.kind == TABLE:
                tables.add(frame.id)
            elif frame.kind == CELL:
                if frame.id not in seen:
                    seen.add(frame.id)
                    row = widths.setdefault(frame.table, {})
                    key = frame.row or frame.table
                    row[key] = max(row.get(key, 0), frame.column + frame.colspan)
                count = cell_blocks[frame.id] = cell_blocks.get(frame.id, 0) + 1
                if count > LAYOUT_CELL_BLOCKS or block.kind in HEADINGS:
                    layout.add(frame.table)
            frame = frame.parent
    for table in tables:
        rows = widths.get(table)
        if not rows or max(rows.values()) <= 1:
            layout.add(table)
    return layout
