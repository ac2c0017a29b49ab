"""Two families over what a provider sends back: the spellings of a held key's secret part (each one
masked wherever it appears), and the spellings of one url (each one source, kept once)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.providers.cleaning import SECRET_RUN, Masker, citation, first_distinct, plain_text
from worker.guardian.urls import canonical_url

SECRET = "5ec7e7a91b03d4f2" * 4  # 64 hex digits, the part after sk-or-v1-
KEY = f"sk-or-v1-{SECRET}"
MASKER = Masker([KEY])


def spaced(text: str, gaps: list[int]) -> str:
    """``text`` with a space or a line break after the characters at the given places."""
    out = []
    for index, ch in enumerate(text):
        out.append(ch)
        if index in gaps:
            out.append("\n" if index % 2 else " ")
    return "".join(out)


SPELLINGS = st.sampled_from(
    [
        lambda s: s,  # bare
        str.upper,
        str.swapcase,
        lambda s: s[: len(s) // 2],  # half of it
        lambda s: s[len(s) // 3 :],  # its end
        lambda s: s[5 : 5 + SECRET_RUN],  # the shortest run that is masked
        lambda s: f"v1-{s}",
        lambda s: f"SK-OR-V1-{s.upper()}",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    spell=SPELLINGS,
    gaps=st.lists(st.integers(min_value=0, max_value=70), max_size=4),
    before=st.text(alphabet="abc xyz.,:;-", max_size=40),
    after=st.text(alphabet="abc xyz.,:;-", max_size=40),
    limit=st.sampled_from([300, 500, 60]),
)
def test_a_held_keys_secret_part_in_any_spelling_is_masked(
    spell: Callable[[str], str], gaps: list[int], before: str, after: str, limit: int
) -> None:
    leaked = spaced(spell(SECRET), gaps)
    shown = plain_text(f"{before} {leaked} {after}", limit, MASKER)
    dense = "".join(shown.split()).lower()
    for index in range(len(SECRET) - SECRET_RUN + 1):
        assert SECRET[index : index + SECRET_RUN] not in dense, (leaked, shown)


@pytest.mark.parametrize("where", ["title", "snippet"])
def test_the_bare_or_upper_cased_secret_in_a_title_or_snippet_is_masked(where: str) -> None:
    for leaked in (SECRET, SECRET.upper(), f"key: {SECRET[:32]} {SECRET[32:]}"):
        texts = {"title": "A page", "snippet": "What the page says."} | {where: f"The key is {leaked}."}
        cited = citation("https://example.org/", texts["title"], texts["snippet"], MASKER)
        assert cited is not None
        assert SECRET[:SECRET_RUN] not in cited[where].lower() and "***" in cited[where]


def test_a_url_holding_the_bare_secret_is_dropped() -> None:
    assert citation(f"https://example.org/?k={SECRET.upper()}", "t", "s", MASKER) is None


def test_short_runs_and_other_hex_are_kept() -> None:
    text = f"commit {SECRET[: SECRET_RUN - 1]} and 0123456789abcdef0123456789abcdef"
    assert plain_text(text, 300, MASKER) == text


def test_a_long_non_key_secret_is_masked_by_its_runs_too() -> None:
    masker = Masker(["correct-horse-battery-staple-42"])
    assert "battery" not in plain_text("pw: CORRECT HORSE-BATTERY-STAPLE", 300, masker)


# One source, many spellings: all are one entry on the menu, so one result.
HOSTS = st.sampled_from(["example.org", "Example.ORG", "EXAMPLE.org"])
SCHEMES = st.sampled_from(["https", "HTTPS", "Https"])
PORTS = st.sampled_from(["", ":443"])
FRAGMENTS = st.sampled_from(["", "#top", "#", "#section-2"])


@settings(max_examples=200, deadline=None)
@given(
    spellings=st.lists(st.tuples(SCHEMES, HOSTS, PORTS, FRAGMENTS), min_size=1, max_size=6),
    path=st.sampled_from(["/a", "/a?b=1", "/", "/%7Euser/page"]),
)
def test_spellings_of_one_https_url_are_one_result(spellings: list[tuple[str, ...]], path: str) -> None:
    urls = [f"{scheme}://{host}{port}{path}{fragment}" for scheme, host, port, fragment in spellings]
    found = first_distinct((citation(url, "t", "s", MASKER) for url in urls), 10)
    assert [c["url"] for c in found] == [urls[0]]  # the first spelling, kept once
    assert len({canonical_url(url) for url in urls}) == 1


@settings(max_examples=100, deadline=None)
@given(
    spellings=st.lists(
        st.tuples(st.sampled_from(["http", "HTTP"]), HOSTS, st.sampled_from(["", ":80"]), FRAGMENTS),
        min_size=1,
        max_size=5,
    )
)
def test_spellings_of_one_http_url_are_one_result(spellings: list[tuple[str, ...]]) -> None:
    urls = [f"{scheme}://{host}{port}/page{fragment}" for scheme, host, port, fragment in spellings]
    found = first_distinct((citation(url, "t", "s", MASKER) for url in urls), 10)
    assert len(found) == 1


def test_different_sources_stay_different() -> None:
    urls = [
        "https://example.org/a",
        "https://example.org/A",  # paths are case-sensitive
        "https://example.org:8443/a",
        "http://example.org/a",  # not the same scheme: another source
        "https://example.org/a?x=1",
        "https://www.example.org/a",
    ]
    found = first_distinct((citation(url, "t", "s", MASKER) for url in urls), 10)
    assert [c["url"] for c in found] == urls
