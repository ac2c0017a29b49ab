"""An office file's bytes to its Markdown and plain text, in the PDF child: which format it is,
the archive's checks, then the format's reader; every failure is a named refusal."""

from __future__ import annotations

import zipfile
from collections.abc import Callable

from jobs.reader.office.archive import Checked, OfficeRefused, check
from jobs.reader.office.blocks import Blocks
from jobs.reader.office.odf import read_odf
from jobs.reader.office.ooxml import read_docx, read_pptx, read_xlsx

Reader = Callable[[bytes, Blocks], None]
# OpenDocument files name their type in a first member called "mimetype".
_ODF = (
    "application/vnd.oasis.opendocument.text",
    "application/vnd.oasis.opendocument.spreadsheet",
    "application/vnd.oasis.opendocument.presentation",
)


def read_office(body: bytes, max_chars: int) -> tuple[str, str, list[str], bool]:
    """(Markdown, plain text, the hazards ignored, whether something was left out); raise
    OfficeRefused when the file is not to be opened or is not an office document."""
    checked = check(body)
    reader = _reader(checked)
    blocks = Blocks(max_chars)
    try:
        reader(body, blocks)
    except OfficeRefused:
        raise
    except MemoryError:
        raise
    except Exception as error:
        raise OfficeRefused("damaged", f"{type(error).__name__} while reading it") from None
    markdown, plain = blocks.render()
    return markdown, plain, checked.hazards, blocks.cut


def _reader(checked: Checked) -> Reader:
    names = checked.names
    if "mimetype" in names:
        try:
            declared = checked.archive.read("mimetype")[:100].decode("ascii", "replace").strip()
        except (zipfile.BadZipFile, OSError, ValueError):
            declared = ""
        if declared in _ODF:
            return read_odf
    if "[Content_Types].xml" in names:
        if "word/document.xml" in names:
            return read_docx
        if "xl/workbook.xml" in names:
            return read_xlsx
        if "ppt/presentation.xml" in names:
            return read_pptx
    raise OfficeRefused("damaged", "the archive is not a DOCX, XLSX, PPTX, ODT, ODS or ODP document")
