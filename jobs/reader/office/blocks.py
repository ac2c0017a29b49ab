"""What an office document is read into, and how it is written out: Markdown, or plain text.

Every format reads into the same few blocks (headings by level, paragraphs, list items by depth,
tables), so a heading is a heading and a table a GFM table whatever program wrote the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from jobs.reader import markdown_escape as escape

# A table's bounds: a spreadsheet can declare a million rows; a reader wants the first screenful.
MAX_ROWS = 2000
MAX_COLUMNS = 50
MAX_CELL_CHARS = 2000

_SPACE = re.compile(r"\s+")


@dataclass
class Blocks:
    """The document's blocks in order, and the characters written so far (reading stops at a cap)."""

    max_chars: int
    markdown: list[str] = field(default_factory=list)
    plain: list[str] = field(default_factory=list)
    chars: int = 0
    cut: bool = False  # the cap, or a table's bounds, left something out

    @property
    def full(self) -> bool:
        return self.chars >= self.max_chars

    def heading(self, text: str, level: int) -> None:
        text = _line(text)
        if text:
            self._add("#" * max(1, min(6, level)) + " " + escape.heading(text), text)

    def paragraph(self, text: str) -> None:
        text = _line(text)
        if text:
            self._add(escape.line(text), text)

    def item(self, text: str, depth: int = 0, ordered: bool = False) -> None:
        text = _line(text)
        if text:
            indent = "   " * max(0, min(8, depth))
            marker = "1." if ordered else "-"
            plain = f"{indent}{'1.' if ordered else '•'} {text}"
            self._add(f"{indent}{marker} {escape.line(text)}", plain, tight=True)

    def table(self, rows: list[list[str]], caption: str = "") -> None:
        """A GFM table; its first row is the header. Rows and columns past the bounds are left out."""
        rows = _trimmed([[_line(cell)[:MAX_CELL_CHARS] for cell in row] for row in rows])
        if len(rows) > MAX_ROWS or any(len(row) > MAX_COLUMNS for row in rows):
            self.cut = True
            rows = [row[:MAX_COLUMNS] for row in rows[:MAX_ROWS]]
        if not rows:
            return
        if caption:
            self.heading(caption, 2)
        width = max(len(row) for row in rows)
        rows = [row + [""] * (width - len(row)) for row in rows]
        lines = ["| " + " | ".join(_cell(cell) for cell in rows[0]) + " |", "|" + " --- |" * width]
        lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows[1:]]
        self._add("\n".join(lines), "\n".join("\t".join(row) for row in rows))

    def _add(self, markdown: str, plain: str, *, tight: bool = False) -> None:
        if self.full:
            self.cut = True
            return
        # List items follow each other without a blank line, so they stay one list.
        joiner = "\n" if tight and self.markdown and self._last_tight else "\n\n"
        self.markdown.append((joiner if self.markdown else "") + markdown)
        self.plain.append((joiner if self.plain else "") + plain)
        self._last_tight = tight
        self.chars += len(markdown) + len(joiner)

    _last_tight: bool = False

    def render(self) -> tuple[str, str]:
        return "".join(self.markdown), "".join(self.plain)


def _line(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _cell(text: str) -> str:
    return escape.inline(text)


def _trimmed(rows: list[list[str]]) -> list[list[str]]:
    """Without the empty rows and the empty columns on the right (a sheet's formatting reaches far)."""
    rows = [row for row in rows if any(row)]
    if not rows:
        return []
    width = max((max((i + 1 for i, cell in enumerate(row) if cell), default=0) for row in rows), default=0)
    return [row[:width] for row in rows]
