"""A PDF page's link annotations, as the reader reads them (``text._uris``, in C: ``_walk.links``).

What a document links to is evidence (where it points a reader), so every URI action is read, in
annotation order, byte for byte; other actions (JavaScript here), empty URIs and URIs past the
byte bound are skipped, and a page gives at most MAX_URIS_PER_PAGE. The oracle is what the test
wrote into the PDF.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.reader.pdf import text
from jobs.reader.pdf.text import MAX_URI_BYTES, extract
from tests.support.pdfs import Link, Page, Text, build_pdf

RECT = (72.0, 700.0, 200.0, 712.0)
# Any Latin-1 character but CR, which a PDF literal string turns into LF (ISO 32000-1, 7.3.4.2).
uris = st.text(st.characters(min_codepoint=1, max_codepoint=255, exclude_characters="\r"), max_size=60)
links = st.one_of(uris.map(lambda uri: Link(RECT, uri=uri)), st.just(Link(RECT, javascript="app.alert(1)")))


def read_links(*pages: list[Link]) -> list[list[str]]:
    body = build_pdf([Page([Text(72, 720, "Linked")], links=page) for page in pages])
    return extract(body, max_chars=40_000, cpu_budget_s=5.0).uris


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pages=st.lists(st.lists(links, max_size=10), min_size=1, max_size=3))
def test_every_uri_action_is_read_in_order_byte_for_byte_and_other_actions_skipped(
    pages: list[list[Link]],
) -> None:
    expected = [[link.uri for link in page if link.uri] for page in pages]
    assert read_links(*pages) == expected


@pytest.mark.parametrize(
    ("length", "kept"), [(1, True), (MAX_URI_BYTES - 1, True), (MAX_URI_BYTES, False), (20_000, False)]
)
def test_a_uri_is_kept_up_to_the_byte_bound_and_skipped_past_it(length: int, kept: bool) -> None:
    long = "https://example.org/" + "a" * (length - 20) if length > 20 else "x" * length
    assert len(long) == length
    after = "https://example.org/after"
    assert read_links([Link(RECT, uri=long), Link(RECT, uri=after)]) == [[long, after] if kept else [after]]


def test_a_page_gives_at_most_its_bound_of_uris_in_annotation_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text, "MAX_URIS_PER_PAGE", 3)
    page = [Link(RECT, uri=f"https://example.org/{n}") for n in range(5)]
    assert read_links(page, page[:2]) == [[f"https://example.org/{n}" for n in range(3)], page_uris(page[:2])]


def page_uris(page: list[Link]) -> list[str]:
    return [link.uri or "" for link in page]
