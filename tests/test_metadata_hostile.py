"""Metadata is page-written: hostile declarations are bounded, skipped or read, never a crash."""

from __future__ import annotations

import datetime as dt

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.reader.html.reduce import reduce_all
from jobs.reader.metadata import jsonld
from jobs.reader.metadata.dates import iso_date
from jobs.reader.metadata.declarations import (
    MAX_JSONLD_CHARS,
    MAX_JSONLD_SCRIPT,
    MAX_JSONLD_SCRIPTS,
    MAX_KEYS,
)
from tests.support.hostile_metadata import ARTICLE, HOSTILE_SCRIPTS, deep_list, ld
from tests.support.metadata_pages import metadata_of, page
from worker.page_metadata import parse


@pytest.mark.parametrize("text", list(HOSTILE_SCRIPTS.values()), ids=list(HOSTILE_SCRIPTS))
async def test_hostile_json_ld_gives_well_formed_metadata_and_the_page_still_reads(text: str) -> None:
    found = await metadata_of(page(ld(text), "<h1>Heading</h1><p>The page text.</p>"))
    assert parse(found) == found
    assert found["published"] is None and found["modified"] is None


async def test_a_json_ld_script_past_the_bound_is_not_read_at_all() -> None:
    big = '{"@type": "Article", "headline": "Too big", "x": "' + "y" * MAX_JSONLD_SCRIPT + '"}'
    found = await metadata_of(page(ld(big) + "<title>Small</title>"))
    assert found["headline"] == "Small"


def test_json_ld_is_kept_up_to_its_total_bound_and_script_count() -> None:
    filler = ld('{"x": "' + "z" * 100_000 + '"}')
    kept = reduce_all(page(filler * 10)).declarations
    assert len(kept.jsonld) == MAX_JSONLD_CHARS // 100_010 and kept.jsonld_chars <= MAX_JSONLD_CHARS
    assert len(reduce_all(page(ld("{}") * 100)).declarations.jsonld) == MAX_JSONLD_SCRIPTS


@pytest.mark.parametrize(
    "text",
    [
        "\ufeff" + ARTICLE,
        "<!--\n" + ARTICLE + "\n-->",
        "//<![CDATA[\n" + ARTICLE + "\n//]]>",
        "// a comment\n" + ARTICLE,
        "/* a comment */\n" + ARTICLE,
        "[" + ARTICLE + "]",
        '{"@graph": [[' + ARTICLE + "]]}",
    ],
    ids=[
        "a BOM",
        "an HTML comment",
        "CDATA",
        "a line comment",
        "a block comment",
        "an array",
        "nested arrays",
    ],
)
async def test_json_ld_in_the_wrappers_pages_use_is_read(text: str) -> None:
    found = await metadata_of(page(ld(text)))
    assert (found["headline"], found["author"]) == ("Found", ["Jane Doe"])


@pytest.mark.parametrize(
    ("author", "names"),
    [
        ('[[{"name": "Jane Doe"}]]', ["Jane Doe"]),
        ('{"name": ["Jane Doe"]}', ["Jane Doe"]),
        ('"Jane Doe, John Roe"', ["Jane Doe", "John Roe"]),
        ('[{"givenName": "Jane", "familyName": "Doe"}]', ["Jane Doe"]),
        ('{"@type": "Organization", "name": "Example News"}', ["Example News"]),
        ('["https://x.test/jane", "@jane"]', []),
    ],
)
async def test_arrays_where_objects_belong_and_objects_where_strings_belong(
    author: str, names: list[str]
) -> None:
    found = await metadata_of(page(ld('{"@type": "Article", "author": ' + author + "}")))
    assert found["author"] == names


async def test_of_two_conflicting_declarations_of_one_kind_the_first_stands() -> None:
    head = (
        ld('{"@type": "Article", "headline": "First"}')
        + ld('{"@type": "Article", "headline": "Second"}')
        + '<meta name="date" content="2020-01-01"><meta name="date" content="2021-01-01">'
    )
    found = await metadata_of(page(head))
    assert (found["headline"], found["published"]) == ("First", "2020-01-01")


async def test_a_script_left_open_reads_the_rest_of_the_page_as_its_text_and_nothing_breaks() -> None:
    found = await metadata_of(
        '<html><head><script type="application/ld+json">{"@type": "Article", "headline": "x"'
    )
    assert parse(found) == found


def test_a_page_of_twenty_thousand_distinct_meta_names_keeps_at_most_the_bound() -> None:
    html = page("".join(f'<meta name="k{n}" content="v">' for n in range(20_000)))
    assert len(reduce_all(html).declarations.metas) == MAX_KEYS


def test_a_thousand_values_of_one_name_keep_only_the_first_few() -> None:
    html = page('<meta name="author" content="Jane Doe">' * 1000)
    assert reduce_all(html).declarations.values("author") == ["Jane Doe"] * 20


KEYS = ["@type", "@id", "@graph", "headline", "name", "author", "publisher", "datePublished", "inLanguage"]
KEYS += ["mainEntity", "mainEntityOfPage", "isPartOf", "identifier", "sameAs", "url", "description"]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=5), children, max_size=6)
    ),
    max_leaves=30,
)


@settings(max_examples=60, deadline=None)
@given(json_values)
async def test_any_json_as_json_ld_gives_well_formed_bounded_metadata(value: object) -> None:
    found = await metadata_of(page(ld(orjson.dumps(value).decode().replace("</", "<\\/"))))
    assert parse(found) == found
    assert len(found["author"]) <= 20 and all(len(name) <= 200 for name in found["author"])


page_strings = st.text(st.characters(codec="utf-8"), max_size=300)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["author", "description", "date", "og:title", "og:locale"]), page_strings)
)
async def test_any_meta_content_gives_well_formed_bounded_metadata(contents: dict[str, str]) -> None:
    head = "".join(
        f'<meta name="{key}" content="{value.replace("&", "&amp;").replace(chr(34), "&quot;")}">'
        for key, value in contents.items()
    )
    found = await metadata_of(page(head))
    assert parse(found) == found
    for value in [*found["author"], found["description"] or "", found["headline"] or ""]:
        assert value == " ".join(value.split())  # collapsed, and no control characters left
        assert not any(ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in value)


NOW = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)


@given(page_strings)
def test_any_string_is_a_plausible_iso_date_or_none(raw: str) -> None:
    found = iso_date(raw, now=NOW)
    if found is not None:
        moment = dt.datetime.fromisoformat(found.replace("Z", "+00:00"))
        assert moment.year >= 1990
        assert moment.replace(tzinfo=moment.tzinfo or dt.UTC) <= NOW + dt.timedelta(days=1)


@given(st.datetimes(min_value=dt.datetime(1990, 1, 1), max_value=dt.datetime(2026, 12, 1)))
def test_an_iso_date_time_comes_back_as_itself(moment: dt.datetime) -> None:
    stamp = moment.replace(microsecond=0).isoformat()
    assert iso_date(stamp, now=NOW) == stamp
    assert iso_date(stamp + "Z", now=NOW) == stamp + "Z"
    assert iso_date(moment.date().isoformat(), now=NOW) == moment.date().isoformat()


@pytest.mark.parametrize(
    "raw",
    [
        "99999-01-01",
        "0000-00-00",
        "1989-12-31",
        "2026-12-05",
        "2024-02-30",
        "2024-13-01",
        "2024-01-01T25:00",
        "",
    ],
)
def test_implausible_or_impossible_dates_are_none(raw: str) -> None:
    assert iso_date(raw, now=NOW) is None


def test_json_ld_parsing_refuses_what_is_not_json_without_raising() -> None:
    for text in ("", "{", "\ufeff", "/*", "<!--", deep_list(100_000), "\x00\x01"):
        assert jsonld.parse(text) is None
