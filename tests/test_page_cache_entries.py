"""What the page cache keeps: entries round-trip, and anything else read from Redis is a miss."""

from __future__ import annotations

import re

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.archive.ids import parse_record_id
from worker.document_notes import parse_ocr, parse_refused
from worker.errors import (
    DestinationBlocked,
    ErrorKind,
    HttpStatus,
    InternalError,
    InvalidRequest,
    Timeout,
    UrlNotInMenu,
)
from worker.guardian.reasons import Reason
from worker.page_metadata import parse as parse_metadata
from worker.state.pages.entry import (
    VERSION,
    Abandoned,
    Failure,
    KeptPage,
    Page,
    decode,
    encode,
    failure_of,
)

PAGE = Page(
    url="https://site.test/a",
    final_url="https://other.test/b",
    status=200,
    content_type="text/html",
    title="T",
    text="Body text.",
    truncated=False,
    redirects=1,
    bytes_read=1234,
    fetched_at="2026-12-02T08:00:00Z",
    extraction="main",
    links=("https://site.test/c",),
    hidden_removed=0,
    hops=(("https://site.test/a", "https://other.test/b"),),
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)


def test_a_page_comes_back_as_it_was_kept() -> None:
    assert decode(encode(PAGE)) == PAGE


def test_a_pdf_page_keeps_its_page_counts() -> None:
    pdf = Page(**{**PAGE.__dict__, "content_type": "application/pdf", "pages": 7, "pages_read": 3})
    assert decode(encode(pdf)) == pdf


def test_a_failure_comes_back_as_the_same_error_kind_message_and_status() -> None:
    failure = failure_of(HttpStatus("the server answered HTTP 404", status=404), ())
    assert failure is not None
    error = decode(encode(failure))
    assert isinstance(error, Failure)
    rebuilt = error.error()
    assert isinstance(rebuilt, HttpStatus)
    assert (rebuilt.message, rebuilt.status) == ("the server answered HTTP 404", 404)


def test_a_guardian_refusal_keeps_its_reason_for_the_metrics() -> None:
    failure = failure_of(DestinationBlocked("10.0.0.1 is refused", reason=Reason.PRIVATE), ())
    assert failure is not None
    decoded = decode(encode(failure))
    assert isinstance(decoded, Failure)
    rebuilt = decoded.error()
    assert isinstance(rebuilt, DestinationBlocked)
    assert rebuilt.reason is Reason.PRIVATE


def test_an_abandoned_flight_says_only_that() -> None:
    assert decode(encode(Abandoned())) == Abandoned()


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(UrlNotInMenu("not seen"), id="the fetcher's own menu refused a hop"),
        pytest.param(InvalidRequest("bad"), id="an argument error"),
        pytest.param(InternalError("bug"), id="a bug"),
    ],
)
def test_failures_that_belong_to_one_report_or_one_job_are_not_shared(error: Exception) -> None:
    assert failure_of(error, ()) is None  # type: ignore[arg-type]


def test_a_timeout_is_shared_with_the_jobs_that_waited_for_it() -> None:
    failure = failure_of(Timeout("fetching from site.test took longer than 20 s"), ())
    assert failure is not None and failure.kind is ErrorKind.TIMEOUT


@given(json_values)
def test_any_json_in_an_entry_key_is_an_outcome_or_a_miss_never_an_error(value: object) -> None:
    outcome = (Page, Failure, Abandoned, KeptPage)
    for raw in (
        orjson.dumps({"v": VERSION, "page": value}),
        orjson.dumps({"v": VERSION, "failure": value}),
        orjson.dumps({"v": VERSION, "kept": value}),
        orjson.dumps(value),
    ):
        decoded = decode(raw)
        assert decoded is None or isinstance(decoded, outcome)


@given(st.binary(max_size=300))
def test_any_bytes_in_an_entry_key_are_a_miss_or_an_outcome(raw: bytes) -> None:
    decoded = decode(raw)
    assert decoded is None or isinstance(decoded, Page | Failure | Abandoned | KeptPage)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_hops(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(hop, list) and len(hop) == 2 and all(isinstance(u, str) for u in hop) for hop in value
    )


# What each field of a kept page must be; anything else makes the entry a miss.
SHAPES = {
    **{name: lambda v: isinstance(v, str) for name in ("url", "final_url", "content_type", "title")},
    **{name: lambda v: isinstance(v, str) for name in ("text", "fetched_at", "extraction")},
    **{name: _is_int for name in ("status", "redirects", "bytes_read", "hidden_removed")},
    "truncated": lambda v: isinstance(v, bool),
    "links": lambda v: isinstance(v, list) and all(isinstance(u, str) for u in v),
    "pages": lambda v: v is None or _is_int(v),
    "pages_read": lambda v: v is None or _is_int(v),
    "hops": _is_hops,
    "document": lambda v: v is None or isinstance(v, str),
    "metadata": lambda v: v is None or parse_metadata(v) is not None,  # tests/test_metadata_cache.py
    "sha256": lambda v: isinstance(v, str) and (v == "" or re.fullmatch("[0-9a-f]{64}", v) is not None),
    "archive_record": lambda v: v is None or parse_record_id(v) is not None,
    "screenshot_record": lambda v: v is None or parse_record_id(v) is not None,
    "rendered": lambda v: isinstance(v, bool),
    "script_shell": lambda v: isinstance(v, bool),
    "ocr": lambda v: v is None or parse_ocr(v) is not None,  # tests/test_ocr_notes.py
    "refused": lambda v: v is None or parse_refused(v) is not None,
    "documents": lambda v: isinstance(v, list) and all(isinstance(u, str) for u in v),
}


@given(
    st.sampled_from(sorted(SHAPES)).flatmap(
        lambda f: st.tuples(st.just(f), json_values.filter(lambda v: not SHAPES[f](v)))
    )
)
def test_a_page_with_one_field_of_the_wrong_shape_is_a_miss(wrong: tuple[str, object]) -> None:
    field, value = wrong
    kept = orjson.loads(encode(PAGE))
    kept["page"][field] = value
    assert decode(orjson.dumps(kept)) is None


def test_every_field_of_a_page_has_a_shape_checked_on_reading() -> None:
    assert set(SHAPES) == set(PAGE.__dict__)


def test_an_entry_of_another_version_is_a_miss() -> None:
    kept = orjson.loads(encode(PAGE))
    kept["v"] = VERSION + 1
    assert decode(orjson.dumps(kept)) is None


def test_a_failure_of_a_kind_that_is_never_shared_is_a_miss() -> None:
    kept = orjson.loads(encode(failure_of(HttpStatus("x", status=404), ())))  # type: ignore[arg-type]
    kept["failure"]["kind"] = "url_not_in_menu"
    assert decode(orjson.dumps(kept)) is None


# An entry that names a page's kept document (the cache's usual entry since a page's text is kept
# once): the same discipline, field by field. The digest names a Redis key, so it is 64 hex digits
# and nothing else.
NAMED = KeptPage("https://site.test/a", "ab" * 32, (("https://site.test/a", "https://other.test/b"),))
NAMED_SHAPES = {
    "url": lambda v: isinstance(v, str),
    "document": lambda v: isinstance(v, str) and re.fullmatch("[0-9a-f]{64}", v) is not None,
    "hops": _is_hops,
}


def test_an_entry_that_names_a_document_comes_back_as_it_was_kept() -> None:
    assert decode(encode(NAMED)) == NAMED


def test_every_field_of_an_entry_that_names_a_document_has_a_shape_checked_on_reading() -> None:
    assert set(NAMED_SHAPES) == set(NAMED.__dict__)


@given(
    st.sampled_from(sorted(NAMED_SHAPES)).flatmap(
        lambda f: st.tuples(
            st.just(f),
            (json_values | st.text(alphabet="0123456789abcdefABCDEF/.:*?", max_size=70)).filter(
                lambda v: not NAMED_SHAPES[f](v)
            ),
        )
    )
)
def test_an_entry_naming_a_document_with_one_field_of_the_wrong_shape_is_a_miss(
    wrong: tuple[str, object],
) -> None:
    field, value = wrong
    kept = orjson.loads(encode(NAMED))
    kept["kept"][field] = value
    assert decode(orjson.dumps(kept)) is None


@given(st.sampled_from(sorted(NAMED_SHAPES)))
def test_an_entry_naming_a_document_without_one_of_its_fields_is_a_miss(field: str) -> None:
    kept = orjson.loads(encode(NAMED))
    del kept["kept"][field]
    assert decode(orjson.dumps(kept)) is None
