"""The walk over a page's objects stops at its bound, forms counted: a page of thousands of empty
forms costs no more than a page of that many objects of text."""

from __future__ import annotations

import pytest

from jobs.reader.pdf import scan
from jobs.reader.pdf.text import extract
from tests.support.pdfs import WHITE, Form, Page, Text, build_pdf

VISIBLE = "Visible words stay."
HIDDEN = "white on the bare page"


def read(body: bytes) -> list[str]:
    return extract(body, max_chars=40_000, cpu_budget_s=5.0).texts


def test_empty_forms_count_toward_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    # Text the walk never reaches is never judged, so hidden text after the bound stays: what the
    # walk reached shows in what is removed.
    body = build_pdf(
        [
            Page(
                [
                    Text(72, 720, VISIBLE),
                    Form([Form([]) for _ in range(20)]),
                    Text(72, 700, HIDDEN, color=WHITE),
                ]
            )
        ]
    )
    assert read(body) == [VISIBLE]  # within the default bound, the white text is reached and removed
    monkeypatch.setattr(scan, "MAX_OBJECTS_PER_PAGE", 10)
    # Ten visits: the first text and nine forms. The white text after them is never judged.
    assert read(body) == [f"{VISIBLE}\n{HIDDEN}"]
