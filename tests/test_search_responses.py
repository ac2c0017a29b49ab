"""Hostile OpenRouter answers: any JSON shape is a usable answer or upstream_error, never a crash."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.providers.cleaning import Masker
from jobs.providers.openrouter import citations, parse_completion
from jobs.providers.upstream import Answer
from worker.errors import UpstreamError

MASKER = Masker(["sk-or-v1-test"])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(["url_citation", "https://a.test/x", "http://a.test/", "javascript:x", "error", ""]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(["type", "url_citation", "url", "title", "content", "x"]), inner, max_size=4
        ),
    ),
    max_leaves=25,
)
annotation = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {
            "type": st.just("url_citation"),
            "url_citation": st.dictionaries(
                st.sampled_from(["url", "title", "content"]), json_values, max_size=3
            ),
        }
    ),
)
shaped = st.fixed_dictionaries(
    {
        "choices": st.one_of(
            json_values,
            st.lists(
                st.fixed_dictionaries(
                    {
                        "message": st.one_of(
                            json_values,
                            st.fixed_dictionaries(
                                {"annotations": st.one_of(json_values, st.lists(annotation))}
                            ),
                        ),
                        "finish_reason": json_values,
                    }
                ),
                max_size=2,
            ),
        ),
        "usage": json_values,
    }
)


def answer(body: Any) -> Answer:
    return Answer(status=200, content_type="application/json", body=orjson.dumps(body), retry_after_s=None)


def check(body: Any, limit: int) -> None:
    try:
        completion = parse_completion(answer(body), MASKER)
        results = citations(completion, limit, MASKER)
    except UpstreamError:
        return
    assert 1 <= len(results) <= limit
    for result in results:
        assert set(result) == {"title", "url", "snippet"}
        assert all(isinstance(v, str) for v in result.values())
        assert result["url"].lower().startswith(("http://", "https://"))


@settings(max_examples=300, deadline=None)
@given(json_values, st.integers(min_value=1, max_value=10))
def test_any_json_at_all_is_an_answer_or_an_upstream_error(body: Any, limit: int) -> None:
    check(body, limit)


@settings(max_examples=300, deadline=None)
@given(shaped, st.integers(min_value=1, max_value=10))
def test_json_shaped_like_an_answer_is_an_answer_or_an_upstream_error(body: Any, limit: int) -> None:
    check(body, limit)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_are_an_answer_or_an_upstream_error_never_a_crash(body: bytes) -> None:
    try:
        completion = parse_completion(
            Answer(status=200, content_type="application/json", body=body, retry_after_s=None), MASKER
        )
        citations(completion, 5, MASKER)
    except UpstreamError:
        pass
