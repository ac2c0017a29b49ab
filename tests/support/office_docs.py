"""Office documents made here with the libraries that write them (python-docx, openpyxl,
python-pptx, odfpy), each with known headings, list items, table cells and lines: the oracle."""

from __future__ import annotations

import io
import zipfile

import docx
import openpyxl
import pptx
from odf.draw import Frame, Page, TextBox
from odf.namespaces import PRESENTATIONNS
from odf.opendocument import OpenDocumentPresentation, OpenDocumentSpreadsheet, OpenDocumentText
from odf.presentation import Notes
from odf.style import MasterPage, PageLayout
from odf.table import Table, TableCell, TableRow
from odf.text import H, List, ListItem, P

HEADINGS = ("Annual report of Example Holdings", "Directors and officers")
ITEMS = ("Anna Smith, chair", "Boris Jones, secretary", "Chen Wei, auditor")
TABLE = (("Year", "Revenue", "Profit"), ("2023", "1200", "150"), ("2024", "1350", "170"))
LINES = tuple(f"Paragraph {n} says the company filed its accounts on day {n * 3}." for n in range(1, 21))


def docx_bytes() -> bytes:
    document = docx.Document()
    document.add_heading(HEADINGS[0], 1)
    for line in LINES[:10]:
        document.add_paragraph(line)
    document.add_heading(HEADINGS[1], 2)
    for item in ITEMS:
        document.add_paragraph(item, style="List Bullet")
    table = document.add_table(rows=len(TABLE), cols=len(TABLE[0]))
    for r, row in enumerate(TABLE):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    for line in LINES[10:]:
        document.add_paragraph(line)
    return _saved(document)


def xlsx_bytes() -> bytes:
    """Two sheets; the second's last column is a formula whose value the file caches."""
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Accounts"
    for row in TABLE:
        sheet.append([int(v) if v.isdigit() else v for v in row])
    notes = workbook.create_sheet("Notes")
    for line in LINES:
        notes.append([line])
    return _saved(workbook)


def pptx_bytes() -> bytes:
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[1])
    slide.shapes.title.text = HEADINGS[0]
    body = slide.placeholders[1].text_frame
    body.text = ITEMS[0]
    for item in ITEMS[1:]:
        body.add_paragraph().text = item
    slide.notes_slide.notes_text_frame.text = LINES[0]
    second = presentation.slides.add_slide(presentation.slide_layouts[5])
    second.shapes.title.text = HEADINGS[1]
    shape = second.shapes.add_table(len(TABLE), len(TABLE[0]), 0, 1500000, 6000000, 1500000)
    for r, row in enumerate(TABLE):
        for c, value in enumerate(row):
            shape.table.cell(r, c).text = value
    box = second.shapes.add_textbox(0, 3500000, 6000000, 2000000).text_frame
    box.text = LINES[1]
    for line in LINES[2:20]:
        box.add_paragraph().text = line
    return _saved(presentation)


def _odf_table(rows: tuple[tuple[str, ...], ...], name: str = "Accounts") -> Table:
    table = Table(name=name)
    for row in rows:
        tr = TableRow()
        for value in row:
            cell = TableCell()
            cell.addElement(P(text=value))
            tr.addElement(cell)
        table.addElement(tr)
    return table


def _odf_list() -> List:
    items = List()
    for item in ITEMS:
        li = ListItem()
        li.addElement(P(text=item))
        items.addElement(li)
    return items


def odt_bytes() -> bytes:
    document = OpenDocumentText()
    document.text.addElement(H(outlinelevel=1, text=HEADINGS[0]))
    for line in LINES[:10]:
        document.text.addElement(P(text=line))
    document.text.addElement(H(outlinelevel=2, text=HEADINGS[1]))
    document.text.addElement(_odf_list())
    document.text.addElement(_odf_table(TABLE))
    for line in LINES[10:]:
        document.text.addElement(P(text=line))
    return _saved(document)


def ods_bytes() -> bytes:
    document = OpenDocumentSpreadsheet()
    document.spreadsheet.addElement(_odf_table(TABLE))
    document.spreadsheet.addElement(_odf_table(tuple((line,) for line in LINES), "Notes"))
    return _saved(document)


def odp_bytes() -> bytes:
    document = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Master", pagelayoutname=layout)
    document.masterstyles.addElement(master)
    page = Page(name="One", masterpagename=master)
    title = _frame("title")
    title_box = TextBox()
    title_box.addElement(P(text=HEADINGS[0]))
    title.addElement(title_box)
    page.addElement(title)
    body = _frame("outline")
    body_box = TextBox()
    body_box.addElement(_odf_list())
    for line in LINES:
        body_box.addElement(P(text=line))
    body.addElement(body_box)
    page.addElement(body)
    notes = Notes()
    notes_frame = _frame("notes")
    notes_box = TextBox()
    notes_box.addElement(P(text="Speaker notes: " + HEADINGS[1]))
    notes_frame.addElement(notes_box)
    notes.addElement(notes_frame)
    page.addElement(notes)
    document.presentation.addElement(page)
    second = Page(name="Two", masterpagename=master)
    table_frame = _frame("")
    table_frame.addElement(_odf_table(TABLE))
    second.addElement(table_frame)
    document.presentation.addElement(second)
    return _saved(document)


def _frame(kind: str) -> Frame:
    frame = Frame(width="20cm", height="5cm", x="1cm", y="1cm")
    if kind:
        frame.setAttrNS(PRESENTATIONNS, "class", kind)
    return frame


MAKERS = {
    "docx": docx_bytes,
    "xlsx": xlsx_bytes,
    "pptx": pptx_bytes,
    "odt": odt_bytes,
    "ods": ods_bytes,
    "odp": odp_bytes,
}


def _saved(document: object) -> bytes:
    buffer = io.BytesIO()
    document.save(buffer)  # type: ignore[attr-defined]
    return buffer.getvalue()


def rezipped(body: bytes, change: dict[str, bytes], *, stored: bool = False) -> bytes:
    """The same archive with members replaced or added."""
    source = zipfile.ZipFile(io.BytesIO(body))
    out = io.BytesIO()
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(out, "w", method) as target:
        for info in source.infolist():
            if info.filename not in change:
                target.writestr(info.filename, source.read(info))
        for name, data in change.items():
            target.writestr(name, data)
    return out.getvalue()
