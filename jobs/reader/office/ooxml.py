"""DOCX, XLSX and PPTX to blocks, with python-docx, openpyxl and python-pptx.

The archive was checked first (``archive.py``); these libraries parse its XML with lxml without
resolving entities or loading anything external, and they never follow a link to another file.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from typing import Any

import docx
import openpyxl
import pptx
from docx.oxml.ns import qn
from docx.table import Table
from docx.text.paragraph import Paragraph
from pptx.util import Emu

from jobs.reader.office.blocks import MAX_COLUMNS, MAX_ROWS, Blocks

_HEADING = re.compile(r"heading\s*(\d)", re.IGNORECASE)
# Placeholders whose paragraphs a slide shows as bullets: body and content (PP_PLACEHOLDER).
_BULLETED = frozenset({2, 7})


def read_docx(body: bytes, blocks: Blocks) -> None:
    document = docx.Document(io.BytesIO(body))
    formats = _number_formats(document)
    for part in document.iter_inner_content():
        if blocks.full:
            blocks.cut = True
            return
        if isinstance(part, Table):
            blocks.table([[cell.text for cell in row.cells] for row in _rows(part)])
        else:
            _paragraph(part, blocks, formats)


def _rows(table: Table) -> list[Any]:
    rows = list(table.rows)
    if len(rows) > MAX_ROWS:
        return rows[: MAX_ROWS + 1]
    return rows


def _paragraph(paragraph: Paragraph, blocks: Blocks, formats: dict[tuple[str, str], bool]) -> None:
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    text = paragraph.text
    heading = _HEADING.match(style)
    if heading:
        blocks.heading(text, int(heading.group(1)))
        return
    if style.lower() == "title":
        blocks.heading(text, 1)
        return
    properties = paragraph._p.pPr  # python-docx has no public API for a paragraph's numbering
    number: Any = properties.numPr if properties is not None else None
    if number is not None or style.lower().startswith("list"):
        depth, ordered = 0, "number" in style.lower()
        if number is not None:
            level = number.ilvl.val if number.ilvl is not None else 0
            num_id = str(number.numId.val) if number.numId is not None else ""
            depth = int(level)
            ordered = formats.get((num_id, str(level)), ordered)
        blocks.item(text, depth, ordered)
        return
    blocks.paragraph(text)


def _number_formats(document: Any) -> dict[tuple[str, str], bool]:
    """(numId, level) -> whether that list level is numbered (not bullets), from numbering.xml."""
    try:
        numbering = document.part.numbering_part.element
    except (KeyError, NotImplementedError, AttributeError):
        return {}
    abstract: dict[str, dict[str, bool]] = {}
    for node in numbering.iterchildren(qn("w:abstractNum")):
        levels = {}
        for level in node.iterchildren(qn("w:lvl")):
            fmt = level.find(qn("w:numFmt"))
            value = fmt.get(qn("w:val")) if fmt is not None else "bullet"
            levels[level.get(qn("w:ilvl")) or "0"] = value not in ("bullet", "none")
        abstract[node.get(qn("w:abstractNumId")) or ""] = levels
    found: dict[tuple[str, str], bool] = {}
    for num in numbering.iterchildren(qn("w:num")):
        ref = num.find(qn("w:abstractNumId"))
        levels = abstract.get(ref.get(qn("w:val")) if ref is not None else "", {})
        for level, ordered in levels.items():
            found[(num.get(qn("w:numId")) or "", level)] = ordered
    return found


def read_xlsx(body: bytes, blocks: Blocks) -> None:
    """One table per sheet under the sheet's name; formulas as the values the file cached."""
    workbook = openpyxl.load_workbook(io.BytesIO(body), read_only=True, data_only=True)
    try:
        for sheet in workbook.worksheets:
            if blocks.full:
                blocks.cut = True
                return
            rows = [
                [_value(value) for value in row]
                for row in sheet.iter_rows(max_row=MAX_ROWS + 1, max_col=MAX_COLUMNS + 1, values_only=True)
            ]
            blocks.heading(sheet.title, 2)
            blocks.table(rows)
    finally:
        workbook.close()


def _value(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime) and value.time() == dt.time():
        return value.date().isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def read_pptx(body: bytes, blocks: Blocks) -> None:
    """Each slide: its title as a heading, its text and tables in reading order, then its notes."""
    presentation = pptx.Presentation(io.BytesIO(body))
    for number, slide in enumerate(presentation.slides, 1):
        if blocks.full:
            blocks.cut = True
            return
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text if title_shape is not None and title_shape.has_text_frame else ""
        blocks.heading(title or f"Slide {number}", 2)
        _shapes(list(slide.shapes), blocks, title_shape)
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None and notes.text.strip():
                blocks.paragraph("Notes: " + notes.text)


def _shapes(shapes: list[Any], blocks: Blocks, title: Any, depth: int = 0) -> None:
    # Reading order: top to bottom, then left to right (the file's order is the order of drawing).
    shapes.sort(key=lambda s: (int(s.top or Emu(0)), int(s.left or Emu(0))))
    for shape in shapes:
        if title is not None and shape.shape_id == title.shape_id:
            continue
        if shape.shape_type is not None and int(shape.shape_type) == 6 and depth < 8:  # a group
            _shapes(list(shape.shapes), blocks, None, depth + 1)
        elif getattr(shape, "has_table", False) and shape.has_table:
            rows = list(shape.table.rows)[: MAX_ROWS + 1]
            blocks.table([[cell.text for cell in row.cells] for row in rows])
        elif shape.has_text_frame:
            bullets = shape.is_placeholder and int(shape.placeholder_format.type) in _BULLETED
            for paragraph in shape.text_frame.paragraphs:
                if bullets:
                    blocks.item(paragraph.text, paragraph.level)
                else:
                    blocks.paragraph(paragraph.text)
