"""Cache-Control as the page cache reads it: no-store and private are never kept, nothing crashes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.net.cache_control import MAX_CHARS, directive_names, may_store

FORBIDDING = ("no-store", "private")
# Directives a page may carry that do not forbid keeping it.
HARMLESS = (
    "public",
    "no-cache",
    "max-age=0",
    "max-age=600",
    "s-maxage=60",
    "must-revalidate",
    "proxy-revalidate",
    "no-transform",
    "immutable",
    "stale-while-revalidate=30",
    'community="UCI"',
    'ext="no-store"',
    'ext="private, no-store"',
)

token_chars = st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-_")
ext_names = st.text(token_chars, min_size=1, max_size=12).filter(lambda n: n not in FORBIDDING)
quoted = st.text(st.characters(blacklist_characters='"\\'), max_size=20).map(lambda t: f'"{t}"')
ext_directives = st.tuples(ext_names, st.none() | quoted | st.integers(0, 10**6).map(str)).map(
    lambda pair: pair[0] if pair[1] is None else f"{pair[0]}={pair[1]}"
)
harmless = st.sampled_from(HARMLESS) | ext_directives
spaces = st.sampled_from(["", " ", "  ", "\t"])


def mixed_case(word: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda flags: "".join(c.upper() if up else c for c, up in zip(word, flags, strict=True))
    )


forbidding = (
    st.sampled_from(FORBIDDING)
    .flatmap(mixed_case)
    .flatmap(lambda name: st.sampled_from([name, f'{name}="Set-Cookie"', f'{name}="a, b"', f"{name}=1"]))
)


def header(directives: list[str], pads: list[str]) -> str:
    return ",".join(f"{pad}{d}{pad}" for d, pad in zip(directives, pads, strict=False))


@given(st.text(max_size=300))
def test_any_header_text_gives_an_answer_and_never_raises(value: str) -> None:
    assert may_store(value) in (True, False)


@given(st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_any_header_bytes_as_aiohttp_decodes_them_give_an_answer(value: str) -> None:
    assert may_store(value) in (True, False)


@given(
    st.lists(harmless, max_size=6),
    forbidding,
    st.integers(0, 6),
    st.lists(spaces, min_size=8, max_size=8),
)
def test_no_store_or_private_anywhere_among_other_directives_is_never_kept(
    others: list[str], forbidden: str, position: int, pads: list[str]
) -> None:
    directives = [*others]
    directives.insert(min(position, len(directives)), forbidden)
    assert may_store(header(directives, pads)) is False


@given(st.lists(harmless, min_size=1, max_size=6), st.lists(spaces, min_size=7, max_size=7))
def test_headers_of_other_directives_are_kept(directives: list[str], pads: list[str]) -> None:
    assert may_store(header(directives, pads)) is True


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        pytest.param(None, True, id="no header"),
        pytest.param("", True, id="empty header"),
        pytest.param("no-store", False, id="no-store"),
        pytest.param("PRIVATE", False, id="private in capitals"),
        pytest.param("max-age=0, private", False, id="private after another directive"),
        pytest.param("public, max-age=60, no-store", False, id="no-store last"),
        pytest.param('private="Set-Cookie"', False, id="private for some fields is private"),
        pytest.param("no-cache", True, id="no-cache asks for revalidation, not for forgetting"),
        pytest.param('foo="no-store"', True, id="a quoted argument is not a directive"),
        pytest.param('foo="a\\"b", no-store', False, id="an escaped quote does not hide what follows"),
        pytest.param('foo="unterminated, public', False, id="an unterminated quote is not trusted"),
        pytest.param(",,, ,", True, id="only separators"),
        pytest.param("public, " * (MAX_CHARS // 8 + 1), False, id="longer than any real header"),
    ],
)
def test_cache_control_values(value: str | None, kept: bool) -> None:
    assert may_store(value) is kept


def test_directive_names_are_lower_cased_and_stripped_of_their_arguments() -> None:
    assert directive_names(' Max-Age=60 , PRIVATE="x,y" ,no-transform') == frozenset(
        {"max-age", "private", "no-transform"}
    )
