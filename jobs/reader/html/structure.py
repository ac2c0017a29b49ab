"""The page structure a block sits in, as the Markdown renderer needs it: lists and their items,
block quotes, tables with their rows and cells.

Each structural element the reducer opens becomes a Frame linked to the frame around it, so
opening one costs one small object whatever the depth, and a block carries only its innermost
frame. Frames stop nesting at MAX_DEPTH: a page nests deeper only to make the output (and every
walk up the chain) large, and Markdown renderers limit nesting themselves (markdown-it's CommonMark
preset at 20 levels, a list and its item being two): text nested deeper than that would vanish
from what a person sees, so past the bound it stays in the innermost frame there is.
"""

from __future__ import annotations

from dataclasses import dataclass

LIST = 1
ITEM = 2
QUOTE = 3
TABLE = 4
ROW = 5
CELL = 6

MAX_DEPTH = 16
# A colspan is at most this many columns: the HTML standard clamps at 1000, which would let one
# cell write a thousand empty ones.
MAX_COLSPAN = 32
# An ordered list's number is at most nine digits, the most CommonMark reads as a list marker.
MAX_START = 999_999_999

STRUCTURAL = frozenset({"ol", "ul", "menu", "li", "blockquote", "table", "tr", "td", "th"})


@dataclass(frozen=True, slots=True, eq=False)
class Frame:
    kind: int
    id: int
    parent: Frame | None
    depth: int
    ordered: bool = False  # LIST: an <ol>
    start: int = 1  # LIST: the number of its first item
    colspan: int = 1  # CELL
    table: int = 0  # ROW and CELL: the id of their table frame (0: none)
    row: int = 0  # CELL: the id of its row frame (0: none)
    column: int = 0  # CELL: where it starts in its row, counting the colspans before it

    def path(self) -> list[Frame]:
        """The frames from the outermost to this one."""
        frames: list[Frame] = []
        frame: Frame | None = self
        while frame is not None:
            frames.append(frame)
            frame = frame.parent
        frames.reverse()
        return frames


class Frames:
    """Makes the frame a structural element opens, given the frame around it."""

    def __init__(self) -> None:
        self._next_id = 1
        # The next column of each open row (by row id, or by table id for cells in no row): an
        # empty cell holds no text, but it still moves the cells after it along.
        self._columns: dict[int, int] = {}

    def open(self, name: str, attrs: dict[str, str], around: Frame | None) -> Frame | None:
        """The new frame, or None when ``name`` adds none here (too deep, or a part out of place)."""
        depth = around.depth + 1 if around is not None else 1
        if depth > MAX_DEPTH:
            return None
        if name == "li":
            return self._make(ITEM, around, depth)
        if name in ("ol", "ul", "menu"):
            ordered = name == "ol"
            start = _number(attrs.get("start")) if ordered else None
            return self._make(LIST, around, depth, ordered=ordered, start=1 if start is None else start)
        if name == "blockquote":
            return self._make(QUOTE, around, depth)
        if name == "table":
            return self._make(TABLE, around, depth)
        table = _nearest(around, TABLE)
        if table is None:
            return None  # a row or cell outside any table is plain text, as a browser shows it
        if name == "tr":
            # A row inside a row of the same table (its end tag implied, but a cell was closed
            # instead) is the next row, as a browser builds the table.
            open_row = _nearest(around, ROW, stop=TABLE)
            if open_row is not None:
                around = open_row.parent
                depth = open_row.depth
            return self._make(ROW, around, depth, table=table.id)
        row = _nearest(around, ROW, stop=TABLE)
        span = _number(attrs.get("colspan"))
        colspan = 1 if span is None or span < 1 else min(span, MAX_COLSPAN)
        key = row.id if row is not None else table.id
        column = self._columns.get(key, 0)
        self._columns[key] = column + colspan
        return self._make(
            CELL,
            around,
            depth,
            colspan=colspan,
            table=table.id,
            row=row.id if row is not None else 0,
            column=column,
        )

    def _make(self, kind: int, around: Frame | None, depth: int, **fields: int | bool) -> Frame:
        frame = Frame(kind, self._next_id, around, depth, **fields)  # type: ignore[arg-type]
        self._next_id += 1
        return frame


def _nearest(frame: Frame | None, kind: int, stop: int = 0) -> Frame | None:
    while frame is not None:
        if frame.kind == kind:
            return frame
        if frame.kind == stop:
            return None
        frame = frame.parent
    return None


def _number(value: str | None) -> int | None:
    """An attribute's integer, as HTML reads one (leading digits, an optional sign), clamped."""
    if value is None:
        return None
    text = value.strip()
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-")
    digits = ""
    for char in text[:12]:
        if not "0" <= char <= "9":
            break
        digits += char
    if not digits:
        return None
    return max(0, min(MAX_START, sign * int(digits)))
