"""The fetch worker's side of a render: the render worker's result is read back as a page, or as the
same error kind, and a result of the wrong shape is never trusted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.fetch.handoff import relayed
from tests.support.results import page_fields, page_from_fields
from worker.errors import ErrorKind, GuardianRefusal
from worker.state.pages.entry import Page

PAGE = Page(
    url="https://site.test/",
    final_url="https://site.test/",
    status=200,
    content_type="text/html",
    title="T",
    text="rendered words",
    truncated=False,
    redirects=0,
    bytes_read=10,
    fetched_at="2026-12-03T00:00:00Z",
    extraction="main",
    links=("https://site.test/a",),
    hidden_removed=3,
    rendered=True,
)


def test_a_render_workers_page_fields_read_back_as_the_same_page() -> None:
    fields = {"ok": True, "tool": "render_page", **page_fields(PAGE, cached=False)}
    assert page_from_fields(fields) == PAGE


@pytest.mark.parametrize("field", ["text", "rendered", "links", "status", "hidden_removed"])
@given(value=st.one_of(st.none(), st.integers(), st.text(), st.lists(st.integers()), st.floats()))
def test_a_result_with_a_field_of_the_wrong_shape_is_not_a_page(field: str, value: object) -> None:
    fields = dict(page_fields(PAGE, cached=False))
    good = fields[field]
    if type(value) is type(good) and not isinstance(good, list):
        return  # the same shape: nothing to refuse
    if isinstance(good, list) and value == []:
        return
    fields[field] = value  # type: ignore[literal-required]
    assert page_from_fields(fields) is None


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_an_error_from_the_render_worker_keeps_its_kind_and_is_not_counted_again(kind: ErrorKind) -> None:
    error = relayed(kind)("the render worker's words")
    assert error.kind is kind
    assert not isinstance(error, GuardianRefusal)  # the render worker counted the refusal already
    assert relayed(kind) is relayed(kind)
