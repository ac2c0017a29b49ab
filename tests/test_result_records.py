"""The result records: every kind goes to the wire and comes back the same, its JSON has exactly the
keys the contract gives that kind, and whatever else is read back is no result, never an error."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from worker.archive.ids import new_record_id
from worker.errors import ErrorKind, HttpStatus, Timeout
from worker.page_metadata import empty
from worker.state.pages.entry import Page
from worker.state.result_records import (
    RENDER_PAGE,
    ErrorResult,
    FetchFields,
    FoundMatch,
    Head,
    OkResult,
    OtherFields,
    Result,
    SearchFields,
    TextPiece,
    as_json,
    encode,
    parse,
)

HEAD = {"ok", "tool", "report_id", "job_id"}
# The contract's keys (../shared/CONTRACT.md, docs/contract.md), kind by kind.
FETCH = HEAD | {
    "url",
    "final_url",
    "status",
    "content_type",
    "title",
    "text",
    "truncated",
    "redirects",
    "bytes_read",
    "fetched_at",
    "extraction",
    "links",
    "hidden_removed",
    "cached",
    "sha256",
    "archived",
    "archive_record",
    "rendered",
    "script_shell",
    "documents",
}
PIECE = {"format", "offset", "total_chars", "next_offset", "refetched"}
SEARCH = HEAD | {"query", "results", "provider"}

text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=20)
count = st.integers(min_value=0, max_value=2**31)
heads = st.builds(Head, tool=text, report_id=st.one_of(st.none(), text), job_id=text)
pages = st.builds(
    Page,
    url=text,
    final_url=text,
    status=count,
    content_type=text,
    title=text,
    text=text,
    truncated=st.booleans(),
    redirects=count,
    bytes_read=count,
    fetched_at=text,
    extraction=st.sampled_from(["main", "full"]),
    links=st.lists(text, max_size=3).map(tuple),
    hidden_removed=count,
    pages=st.one_of(st.none(), count),
    pages_read=st.one_of(st.none(), count),
    metadata=st.one_of(st.none(), st.builds(empty)),
    sha256=st.sampled_from(["", "ab" * 32]),
    archive_record=st.one_of(st.none(), st.builds(new_record_id)),
    rendered=st.booleans(),
    script_shell=st.booleans(),
    documents=st.lists(text, max_size=3).map(tuple),
)
pieces = st.builds(
    TextPiece,
    format=st.sampled_from(["markdown", "text"]),
    text=text,
    offset=count,
    total_chars=count,
    next_offset=st.one_of(st.none(), count),
    page_offsets=st.one_of(st.none(), st.lists(count, max_size=3).map(tuple)),
    matches=st.one_of(
        st.none(),
        st.lists(st.builds(FoundMatch, count, text, st.one_of(st.none(), count)), max_size=3).map(tuple),
    ),
    read_budget_cut=st.sampled_from([None, True]),
)
fetches = st.builds(
    OkResult,
    heads.map(lambda h: Head("fetch_page", h.report_id, h.job_id)),
    st.builds(FetchFields, pages, st.booleans(), st.one_of(st.none(), pieces), st.booleans()),
)
citations = st.fixed_dictionaries({"title": text, "url": text, "snippet": text})
searches = st.builds(
    OkResult,
    heads.map(lambda h: Head("web_search", h.report_id, h.job_id)),
    st.builds(
        SearchFields,
        text,
        st.lists(citations, max_size=3).map(tuple),
        text,
        st.one_of(st.none(), st.builds(new_record_id)),
        st.booleans(),
    ),
)
errors = st.builds(
    ErrorResult,
    heads,
    st.sampled_from(list(ErrorKind)),
    text,
    st.one_of(st.none(), text),
    st.one_of(st.none(), text),
    st.one_of(st.none(), count),
)


def contract_keys(result: Result) -> set[str]:
    if isinstance(result, ErrorResult):
        keys = HEAD | {"error"}
        keys |= {"url"} if result.url is not None else set()
        keys |= {"query"} if result.query is not None else set()
        has_status = result.status is not None or result.kind is ErrorKind.HTTP_STATUS
        return keys | ({"status"} if has_status else set())
    fields = result.fields
    if isinstance(fields, SearchFields):
        return SEARCH | ({"archived", "archive_record"} if fields.asked else set())
    assert isinstance(fields, FetchFields)
    keys = set(FETCH)
    keys |= {"pages", "pages_read"} if fields.page.pages is not None else set()
    keys |= {"metadata"} if fields.page.metadata is not None else set()
    if (piece := fields.piece) is not None:
        keys |= PIECE
        keys |= {"page_offsets"} if piece.page_offsets is not None else set()
        keys |= {"matches"} if piece.matches is not None else set()
        keys |= {"read_budget_cut"} if piece.read_budget_cut is not None else set()
    return keys


@given(st.one_of(fetches, searches, errors))
def test_every_result_goes_to_the_wire_and_back_with_exactly_its_kinds_keys(result: Result) -> None:
    wire = encode(result)
    assert set(orjson.loads(wire)) == contract_keys(result)
    back = parse(wire)
    assert back is not None
    assert encode(back) == wire


@given(fetches)
def test_a_fetch_result_says_archived_and_script_shell_as_the_contract_defines_them(result: OkResult) -> None:
    shown = as_json(result)
    page = result.fields.page  # type: ignore[union-attr]
    assert shown["archived"] is (page.archive_record is not None)
    assert shown["script_shell"] is (page.script_shell and not page.rendered)
    assert "hops" not in shown and "document" not in shown  # the page cache's own


@given(pages)
def test_a_render_workers_page_reads_back_as_the_same_page(page: Page) -> None:
    page = Page(**{**page.__dict__, "script_shell": page.script_shell and not page.rendered})
    if page.pages is None:
        page = Page(**{**page.__dict__, "pages_read": None})
    elif page.pages_read is None:
        page = Page(**{**page.__dict__, "pages_read": page.pages})
    back = parse(encode(OkResult(Head(RENDER_PAGE, "r", "j"), FetchFields(page, cached=False))))
    assert isinstance(back, OkResult) and isinstance(back.fields, FetchFields)
    assert back.fields.page == page


def test_an_error_result_says_its_status_when_known_and_always_for_http_status() -> None:
    head = Head("fetch_page", "r", "j")
    assert as_json(ErrorResult.of(head, HttpStatus("gone", status=410)))["status"] == 410
    assert "status" not in as_json(ErrorResult.of(head, Timeout("slow")))
    assert as_json(ErrorResult(head, ErrorKind.HTTP_STATUS, "no status"))["status"] is None


def test_strings_with_lone_surrogates_reach_the_wire_as_replacement_characters() -> None:
    head = Head("fetch_page", "r", "j")
    shown = orjson.loads(
        encode(ErrorResult(head, ErrorKind.TIMEOUT, "a\udc80b", url="https://x.test/\ud800"))
    )
    assert shown["error"]["message"] == "a\ufffdb" and shown["url"] == "https://x.test/\ufffd"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(
    st.one_of(
        json_values,
        st.fixed_dictionaries(
            {"ok": st.booleans(), "tool": st.sampled_from(["fetch_page", "web_search", RENDER_PAGE, "echo"])},
            optional={"job_id": text, "report_id": text, "error": json_values, "query": json_values},
        ),
    )
)
def test_anything_read_back_is_a_result_or_none_never_an_error(value: object) -> None:
    back = parse(orjson.dumps(value))
    assert back is None or isinstance(back, OkResult | ErrorResult)
    if isinstance(back, OkResult) and isinstance(back.fields, OtherFields):
        assert back.head.tool not in {"fetch_page", "web_search", RENDER_PAGE}


@given(st.binary(max_size=200))
def test_any_bytes_read_back_are_a_result_or_none(raw: bytes) -> None:
    back = parse(raw)
    assert back is None or isinstance(back, OkResult | ErrorResult)
