"""The walk over a page's objects stops at its bound, forms counted: a page of thousands of empty
forms costs no more than a page of that many objects of text."""

from __future__ import annotations

import pypdfium2 as pdfium
import pypdfium2.raw as raw
import pytest

from jobs.reader.pdf import text
from tests.support.pdfs import Form, Page, Text, build_pdf


def page_objects(body: bytes) -> list[int]:
    document = pdfium.PdfDocument(body)
    try:
        return [kind for kind, _, _ in text._objects(document[0])]
    finally:
        document.close()


def test_empty_forms_count_toward_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    body = build_pdf([Page([Form([Form([]) for _ in range(20)]), Text(72, 700, "after the forms")])])
    assert raw.FPDF_PAGEOBJ_TEXT in page_objects(body)  # within the default bound, the text is reached
    monkeypatch.setattr(text, "MAX_OBJECTS_PER_PAGE", 10)
    assert page_objects(body) == []  # ten visits, all forms: the text after them is never reached
