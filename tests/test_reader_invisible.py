"""Invisible characters: removed and counted wherever text comes from, judged the same whether the
text arrives whole or in pieces, and never in one step long enough to stall the worker."""

from __future__ import annotations

import asyncio
import time
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.reader.document import Document, build_document
from jobs.reader.hidden import SOFT_HYPHEN, InvisibleStripper, strip_invisible
from tests.support.hostile_bodies import BODIES, TEXT_TYPES

INVISIBLE_SAMPLES = [
    "\u200b",
    "\u200c",
    "\u200d",
    "\u200e",
    "\u202e",
    "\u2066",
    "\u2060",
    "\ufeff",
    "\ufe0f",
    "\U000e0041",
    "\x01",
    "\x7f",
    "\u034f",
    "\u180e",
]
VISIBLE_SAMPLES = [
    "a",
    "Z",
    " ",
    "1",
    "é",
    "م",
    "क",
    "\u094d",
    "ก",
    "\u0e31",
    "👨",
    "\U0001f3fb",
    "𝐀",
    "𝟎",
    "—",
    "€",
]
TEXT = st.lists(st.sampled_from([*INVISIBLE_SAMPLES, *VISIBLE_SAMPLES, SOFT_HYPHEN]), max_size=40).map(
    "".join
)


def reference(text: str) -> tuple[str, int]:
    """The rule as the docs state it, one character at a time: every invisible character goes,
    except a single joiner between two visible non-ASCII letters (or, for ZWJ, symbols)."""
    text = text.replace(SOFT_HYPHEN, "")
    invisible = set(INVISIBLE_SAMPLES)
    out = []
    for index, char in enumerate(text):
        if char not in invisible:
            out.append(char)
            continue
        if char not in "\u200c\u200d" or index == 0 or index + 1 == len(text):
            continue
        before, after = text[index - 1], text[index + 1]
        joins = "LMS" if char == "\u200d" else "LM"
        if (
            before not in invisible
            and after not in invisible
            and not before.isascii()
            and not after.isascii()
            and unicodedata.category(before)[0] in joins
            and unicodedata.category(after)[0] in joins
        ):
            out.append(char)
    cleaned = "".join(out)
    return cleaned, len(text) - len(cleaned)


@settings(max_examples=500, deadline=None)
@given(TEXT)
def test_invisible_characters_go_except_a_joiner_that_spells_a_word(text: str) -> None:
    assert strip_invisible(text) == reference(text)


@settings(max_examples=500, deadline=None)
@given(TEXT, st.lists(st.integers(min_value=0, max_value=40), max_size=6))
def test_text_stripped_in_pieces_reads_as_text_stripped_whole(text: str, cuts: list[int]) -> None:
    stripper = InvisibleStripper()
    pieces = []
    previous = 0
    for cut in [*sorted(cut for cut in cuts if cut <= len(text)), len(text)]:
        pieces.append(stripper.feed(text[previous:cut]))
        previous = cut
    stripper.finish()
    assert ("".join(pieces), stripper.removed) == strip_invisible(text)


def build(body: bytes, content_type: str | None, cpu_budget_s: float = 3.0) -> Document:
    return asyncio.run(
        build_document(
            body,
            content_type,
            "https://example.org/",
            extract="main",
            max_chars=40_000,
            cpu_budget_s=cpu_budget_s,
            body_truncated=False,
        )
    )


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", "application/xml", None])
def test_a_text_body_loses_its_invisible_characters_and_counts_them(content_type: str | None) -> None:
    document = build("pay\u200bload \u202eevil\u202c کتاب\u200cها".encode(), content_type)
    assert (document.text, document.hidden_removed) == ("payload evil کتاب\u200cها", 3)


@pytest.mark.parametrize("content_type", [kind for kind in TEXT_TYPES if kind != "text/html"])
def test_a_text_body_cut_by_the_cpu_budget_says_truncated(content_type: str | None) -> None:
    body = BODIES["accented letters and joiners"](2 * 1024 * 1024)
    document = build(body, content_type, cpu_budget_s=0.001)
    assert document.truncated
    assert 0 < len(document.text) < 40_000


@pytest.mark.parametrize("content_type", TEXT_TYPES)
@pytest.mark.parametrize("name", sorted(BODIES))
def test_the_event_loop_keeps_turning_while_a_hostile_body_is_read(
    name: str, content_type: str | None
) -> None:
    gaps: list[float] = []

    async def scenario() -> Document:
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.005)
        document = await build_document(
            BODIES[name](2 * 1024 * 1024),
            content_type,
            "https://example.org/",
            extract="main",
            max_chars=40_000,
            cpu_budget_s=3.0,
            body_truncated=False,
        )
        done.set()
        await task
        return document

    document = asyncio.run(scenario())
    assert len(document.text) <= 40_000
    # No turn is long: each step is a few milliseconds, where one call over the whole body took
    # half a second. The bound is loose because other processes share the machine;
    # bench/loop_lag.py measures the real figure.
    assert gaps
    assert max(gaps) < 0.25
