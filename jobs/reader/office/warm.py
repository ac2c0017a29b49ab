"""Tiny documents of each office format, written and read once when a child starts: the readers
import modules as they meet parts of a file, and once confined the child can import nothing."""

from __future__ import annotations

import io

import docx
import openpyxl
import pptx
from odf.opendocument import OpenDocument, OpenDocumentPresentation, OpenDocumentSpreadsheet, OpenDocumentText
from odf.table import Table, TableCell, TableRow
from odf.text import H, List, ListItem, P

from jobs.reader.office.read import read_office


def samples() -> list[bytes]:
    """One small document of each format, with a heading, a list and a table where it has them."""
    out: list[bytes] = []
    document = docx.Document()
    document.add_heading("Heading", 1)
    document.add_paragraph("item", style="List Bullet")
    document.add_table(rows=1, cols=1).cell(0, 0).text = "cell"
    out.append(_saved(document))
    workbook = openpyxl.Workbook()
    workbook.active.append(["a", 1])
    out.append(_saved(workbook))
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[1])
    slide.shapes.title.text = "Title"
    slide.notes_slide.notes_text_frame.text = "notes"
    out.append(_saved(presentation))
    for maker in (OpenDocumentText, OpenDocumentSpreadsheet, OpenDocumentPresentation):
        odf: OpenDocument = maker()
        table = Table(name="Sheet")
        row = TableRow()
        cell = TableCell()
        cell.addElement(P(text="cell"))
        row.addElement(cell)
        table.addElement(row)
        items = List()
        item = ListItem()
        item.addElement(P(text="item"))
        items.addElement(item)
        if maker is OpenDocumentText:
            odf.text.addElement(H(outlinelevel=1, text="Heading"))
            odf.text.addElement(items)
            odf.text.addElement(table)
        elif maker is OpenDocumentSpreadsheet:
            odf.spreadsheet.addElement(table)
        out.append(_saved(odf))
    return out


def warm_office() -> None:
    for body in samples():
        read_office(body, 1000)


def _saved(document: object) -> bytes:
    buffer = io.BytesIO()
    document.save(buffer)  # type: ignore[attr-defined]
    return buffer.getvalue()
