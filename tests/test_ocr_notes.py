"""A result's ``ocr`` and ``refused`` as the page cache reads them back: checked value by value."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from worker.document_notes import parse_ocr, parse_refused

NOTE = {"pages": [1, 2], "engine": "tesseract 5.5.4", "languages": "eng", "mean_confidence": 91.5}


def test_a_note_reads_back_as_written() -> None:
    assert parse_ocr(NOTE) == NOTE
    stopped = {**NOTE, "unread_from": 3, "stopped": "time"}
    assert parse_ocr(stopped) == stopped


@given(
    st.sampled_from(sorted(NOTE)),
    st.one_of(st.none(), st.booleans(), st.text(max_size=3), st.lists(st.text(max_size=2), max_size=2)),
)
def test_a_note_with_a_field_of_the_wrong_shape_is_no_note(field: str, value: object) -> None:
    wrong = {**NOTE, field: value}
    # Only strings stand for the engine and languages; only a list of page numbers (here only the
    # empty one: the lists drawn hold strings) for the pages; nothing drawn is a confidence.
    expected_ok = (field in ("engine", "languages") and isinstance(value, str)) or (
        field == "pages" and value == []
    )
    assert (parse_ocr(wrong) is not None) == expected_ok


def test_where_ocr_stopped_is_kept_only_with_why() -> None:
    assert "unread_from" not in (parse_ocr({**NOTE, "unread_from": 3}) or {})


@given(st.lists(st.text(max_size=600), max_size=25))
def test_refused_is_a_short_list_of_short_strings(values: list[str]) -> None:
    ok = len(values) <= 20 and all(len(value) <= 500 for value in values)
    assert (parse_refused(values) is not None) == ok
