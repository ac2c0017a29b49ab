"""ODT, ODS and ODP to blocks, with odfpy.

The archive was checked first (``archive.py``). odfpy parses with the standard library's expat,
which does not fetch external entities; the check refused any DTD before it got here.
"""

from __future__ import annotations

import io
from typing import Any

from odf import teletype
from odf.namespaces import DRAWNS, OFFICENS, PRESENTATIONNS, TABLENS, TEXTNS
from odf.opendocument import load

from jobs.reader.office.blocks import MAX_COLUMNS, MAX_ROWS, Blocks

MAX_DEPTH = 32


def read_odf(body: bytes, blocks: Blocks) -> None:
    document = load(io.BytesIO(body))
    root = document.body
    for part in root.childNodes:
        if part.qname == (OFFICENS, "spreadsheet"):
            for table in _children(part, TABLENS, "table"):
                blocks.heading(_attr(table, TABLENS, "name"), 2)
                blocks.table(_table(table))
        elif part.qname == (OFFICENS, "presentation"):
            for number, page in enumerate(_children(part, DRAWNS, "page"), 1):
                _slide(page, number, blocks)
        else:
            _walk(part, blocks, 0)


def _walk(node: Any, blocks: Blocks, depth: int) -> None:
    for child in node.childNodes:
        if blocks.full:
            blocks.cut = True
            return
        if child.nodeType != child.ELEMENT_NODE or depth > MAX_DEPTH:
            continue
        name = child.qname
        if name == (TEXTNS, "h"):
            level = _attr(child, TEXTNS, "outline-level")
            blocks.heading(teletype.extractText(child), int(level) if level.isdigit() else 1)
        elif name == (TEXTNS, "p"):
            blocks.paragraph(teletype.extractText(child))
        elif name == (TEXTNS, "list"):
            _list(child, blocks, 0)
        elif name == (TABLENS, "table"):
            blocks.table(_table(child))
        elif name[1] not in ("notes", "tracked-changes", "annotation", "sequence-decls"):
            _walk(child, blocks, depth + 1)


def _list(node: Any, blocks: Blocks, depth: int) -> None:
    for item in node.childNodes:
        if item.nodeType != item.ELEMENT_NODE or depth > MAX_DEPTH:
            continue
        for part in item.childNodes:
            if part.nodeType != part.ELEMENT_NODE:
                continue
            if part.qname == (TEXTNS, "list"):
                _list(part, blocks, depth + 1)
            elif part.qname in ((TEXTNS, "p"), (TEXTNS, "h")):
                blocks.item(teletype.extractText(part), depth)


def _table(table: Any) -> list[list[str]]:
    """The rows as shown (a cell's cached text), repeats expanded within the bounds."""
    rows: list[list[str]] = []
    for row in _descendants(table, TABLENS, "table-row"):
        cells: list[str] = []
        for cell in row.childNodes:
            if cell.nodeType != cell.ELEMENT_NODE or cell.qname[1] not in (
                "table-cell",
                "covered-table-cell",
            ):
                continue
            text = "\n".join(teletype.extractText(p) for p in _children(cell, TEXTNS, "p"))
            repeat = _count(cell, "number-columns-repeated")
            cells.extend([text] * min(repeat, MAX_COLUMNS + 1 - len(cells)))
            if len(cells) > MAX_COLUMNS:
                break
        repeat = _count(row, "number-rows-repeated")
        # A sheet pads itself with a million repeated empty rows: only rows with text repeat.
        rows.extend([cells] * (min(repeat, MAX_ROWS + 1 - len(rows)) if any(cells) else 1))
        if len(rows) > MAX_ROWS:
            break
    return rows


def _slide(page: Any, number: int, blocks: Blocks) -> None:
    frames = list(_children(page, DRAWNS, "frame"))
    title = next((f for f in frames if _attr(f, PRESENTATIONNS, "class") == "title"), None)
    blocks.heading(
        teletype.extractText(title).strip()
        if title is not None
        else f"Slide {_attr(page, DRAWNS, 'name') or number}",
        2,
    )
    for frame in frames:
        if frame is title:
            continue
        bullets = _attr(frame, PRESENTATIONNS, "class") in ("outline", "")
        for box in frame.childNodes:
            if box.nodeType != box.ELEMENT_NODE:
                continue
            if box.qname == (TABLENS, "table"):
                blocks.table(_table(box))
            elif bullets and box.qname == (DRAWNS, "text-box"):
                _walk(box, blocks, 1)
            else:
                _walk(box, blocks, 1)
    for notes in _children(page, PRESENTATIONNS, "notes"):
        text = " ".join(teletype.extractText(p) for p in _descendants(notes, TEXTNS, "p")).strip()
        if text:
            blocks.paragraph("Notes: " + text)


def _children(node: Any, namespace: str, name: str) -> list[Any]:
    return [c for c in node.childNodes if c.nodeType == c.ELEMENT_NODE and c.qname == (namespace, name)]


def _descendants(node: Any, namespace: str, name: str) -> list[Any]:
    found: list[Any] = []
    stack = [iter(node.childNodes)]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            continue
        if child.nodeType != child.ELEMENT_NODE:
            continue
        if child.qname == (namespace, name):
            found.append(child)
        elif len(stack) < MAX_DEPTH:
            stack.append(iter(child.childNodes))
    return found


def _attr(node: Any, namespace: str, name: str) -> str:
    value = node.attributes.get((namespace, name))
    return str(value) if value is not None else ""


def _count(node: Any, name: str) -> int:
    value = _attr(node, TABLENS, name)
    return int(value) if value.isdigit() else 1
