"""The fast-path tokenizer yields html5lib's tokens: on random markup, at every place the markup can
sit against its 10,240-character read chunk, in every initial state, and on the html5lib test
corpus (read from ../shared/data/html5lib-tests/tokenizer when present)."""

from __future__ import annotations

import json
import os
import re
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from html5lib._tokenizer import HTMLTokenizer
from html5lib.constants import tokenTypes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.reader.html.tokens import (
    CHARACTERS,
    COMMENT,
    END_TAG,
    SPACE_CHARACTERS,
    START_TAG,
    StreamingTokenizer,
)

PARSE_ERROR = tokenTypes["ParseError"]
CHUNK = 10_240
CORPUS = Path(
    os.environ.get("HTML5LIB_TESTS", Path(__file__).resolve().parents[2] / "shared/data/html5lib-tests")
)
STATES = {
    "Data state": "dataState",
    "PLAINTEXT state": "plaintextState",
    "RCDATA state": "rcdataState",
    "RAWTEXT state": "rawtextState",
    "Script data state": "scriptDataState",
    "CDATA section state": "cdataSectionState",
}

# The tokenizer's fast paths must read markup exactly as html5lib's states do.

FRAGMENTS = st.sampled_from(
    [
        "<p>",
        "</p>",
        "<div class='a b' id=x>",
        '<a href="/x?a=1&amp;b=2">',
        "</a>",
        "<img src=x alt='y'/>",
        "<br/>",
        '<input value="a"b=c>',
        "<p title=x/>",
        "<a b=>",
        "<a =b>",
        "<a 'b'>",
        "<x\x00y z=\x00>",
        "<A HREF='u' HREF=v>",
        "<a / b>",
        "</div foo=bar>",
        "</ x>",
        "<!-- c -- d --!>",
        "<!---->",
        "<!-->",
        "<!x bogus>",
        "<?php x ?>",
        "<!DOCTYPE html>",
        "&amp;",
        "&notit;",
        "&#x41;",
        "&",
        "<",
        ">",
        " ",
        "\n",
        "text",
        "é",
        '"',
        "'",
        "=",
        "/",
        "\x00",
    ]
)


def _tokens(tokenizer: Any) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            out.append(("text", "".join(text)))
            text.clear()

    queue = tokenizer.tokenQueue
    more = True
    while more:
        more = tokenizer.state()
        while queue:
            token = queue.popleft()
            kind = token["type"]
            if kind in (CHARACTERS, SPACE_CHARACTERS):
                text.append(token["data"])
                continue
            if kind == PARSE_ERROR:
                continue
            flush()
            if kind == START_TAG:
                out.append(("start", token["name"], dict(token["data"]), token["selfClosing"]))
            elif kind == END_TAG:
                out.append(("end", token["name"]))
            elif kind == COMMENT:
                out.append(("comment",))
            else:
                out.append((kind, token.get("name")))
    flush()
    return out


def _start(tokenizer: Any, state: str, last_start_tag: str | None) -> Any:
    tokenizer.tokenQueue = deque()
    tokenizer.stream.reportCharacterErrors = None  # parse errors are not compared; this saves time
    tokenizer.state = getattr(tokenizer, STATES[state])
    if last_start_tag is not None:
        tokenizer.currentToken = {"type": START_TAG, "name": last_start_tag}
    return tokenizer


def both(markup: str, state: str = "Data state", last_start_tag: str | None = None) -> tuple[Any, Any]:
    """html5lib's tokens and ours for ``markup`` read from ``state``."""
    theirs = _tokens(_start(HTMLTokenizer(markup), state, last_start_tag))
    ours = _tokens(_start(StreamingTokenizer(markup), state, last_start_tag))
    return theirs, ours


def padded(markup: str, before_boundary: int) -> str:
    """``markup`` placed so that its first ``before_boundary`` characters end the first read chunk."""
    return "x" * max(0, CHUNK - before_boundary) + markup


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(FRAGMENTS, max_size=40))
def test_the_fast_paths_read_tags_exactly_as_html5lib_does(fragments: list[str]) -> None:
    theirs, ours = both("".join(fragments))
    assert ours == theirs


STRADDLING = st.one_of(
    FRAGMENTS,
    st.sampled_from(
        [
            "<![CDATA[",
            "]]>",
            "]",
            "]]",
            "</script>",
            "</title>",
            "<!--",
            "-->",
            "<script>",
            "&",
            "&amp",
            "&#x",
            "\r\n",
            "\r",
            "<a title='",
            "'>",
            "<!DOCTYPE",
        ]
    ),
    st.text(max_size=3),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.lists(STRADDLING, min_size=1, max_size=12),
    st.sampled_from(sorted(STATES)),
    st.integers(min_value=0, max_value=40),
)
def test_markup_that_straddles_a_read_chunk_reads_as_it_does_in_one_piece(
    fragments: list[str], state: str, before_boundary: int
) -> None:
    theirs, ours = both(padded("".join(fragments), before_boundary), state, "title")
    assert ours == theirs


@pytest.mark.parametrize("size", [CHUNK - 9, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5])
def test_a_cdata_section_longer_than_a_chunk_reads_whole(size: int) -> None:
    theirs, ours = both("y]" * (size // 2) + "]]><p>after", "CDATA section state")
    assert ours == theirs
    assert ours[0] == ("text", "y]" * (size // 2))


def test_cdata_opens_only_where_the_reducer_says_the_current_node_is_foreign() -> None:
    markup = "<![CDATA[a<b]]>c"
    foreign = StreamingTokenizer(markup)
    foreign.cdata_allowed = lambda: True
    assert _tokens(foreign) == [("text", "a<bc")]
    assert _tokens(StreamingTokenizer(markup)) == [("comment",), ("text", "c")]


def _unescape(text: str) -> str:
    return re.sub(r"\\u([0-9A-Fa-f]{4})", lambda match: chr(int(match.group(1), 16)), text)


def corpus_cases() -> list[Any]:
    folder = CORPUS / "tokenizer"
    if not folder.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no html5lib test corpus at {folder}"))]
    cases = []
    for path in sorted(folder.glob("*.test")):
        for number, test in enumerate(json.loads(path.read_text(encoding="utf-8")).get("tests", [])):
            markup = _unescape(test["input"]) if test.get("doubleEscaped") else test["input"]
            for state in test.get("initialStates", ["Data state"]):
                case = (markup, state, test.get("lastStartTag"), number)
                cases.append(pytest.param(case, id=f"{path.stem}-{number}-{state}"))
    return cases


@pytest.mark.parametrize("case", corpus_cases())
def test_the_html5lib_corpus_reads_alike_wherever_it_meets_a_chunk_boundary(case: Any) -> None:
    markup, state, last_start_tag, number = case
    theirs, ours = both(markup, state, last_start_tag)
    assert ours == theirs
    # Two places of the chunk boundary per case, moving from case to case across the corpus.
    turn = number % max(1, len(markup))
    for before_boundary in {1 + turn, len(markup) - 1 - turn}:
        if 0 < before_boundary < len(markup):
            theirs, ours = both(padded(markup, before_boundary), state, last_start_tag)
            assert ours == theirs, before_boundary
