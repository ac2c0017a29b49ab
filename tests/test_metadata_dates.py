"""Publication dates a page shows rather than declares in a meta tag (a byline, microdata on a
visible element), the ways journals write them, dates with impossible zones; and canonical URLs
that point at internal addresses.

Each date is written by the test in one form and checked against the ISO day the test computed
itself from the same numbers."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.reader.metadata.dates import date_in_text, iso_date
from tests.support.metadata_pages import metadata_of, page

MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
GERMAN = [
    "Januar", "Februar", "März", "April", "Mai", "Juni",
    "Juli", "August", "September", "Oktober", "November", "Dezember",
]  # fmt: skip
ARTICLE = "<p>The board voted to expand the harbour after two years of studies and public hearings.</p>"

days = st.dates(min_value=dt.date(1995, 1, 1), max_value=dt.date(2025, 12, 31))


def written(day: dt.date, form: int) -> str:
    month = MONTHS[day.month - 1]
    return [
        f"{month} {day.day}, {day.year}",
        f"{day.day} {month} {day.year}",
        f"{day.day}. {GERMAN[day.month - 1]} {day.year}",
        f"{day.day:02d}.{day.month:02d}.{day.year}",
        f"{day.year} {month[:3]} {day.day}",
        f"{day.year}-{day.month:02d}-{day.day:02d}",
        f"{month[:3]}. {day.day}, {day.year}",
    ][form]


# Bylines under the headline


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    days, st.integers(0, 6), st.sampled_from(["Published {}", "{} | Politics", "Posted on {} by staff", "{}"])
)
async def test_a_date_in_the_byline_under_the_headline_is_the_publication_date(
    day: dt.date, form: int, line: str
) -> None:
    body = f"<h1>Harbour to grow</h1><p>{line.format(written(day, form))}</p>{ARTICLE}"
    found = await metadata_of(page(body=body))
    assert found["published"] == day.isoformat()
    assert found["sources"]["published"] == "byline"


async def test_an_update_line_is_not_the_publication_date() -> None:
    body = f"<h1>Harbour to grow</h1><p>Updated March 9, 2024</p><p>March 2, 2024</p>{ARTICLE}"
    assert (await metadata_of(page(body=body)))["published"] == "2024-03-02"
    only_update = f"<h1>Harbour to grow</h1><p>Updated March 9, 2024</p>{ARTICLE}"
    assert (await metadata_of(page(body=only_update)))["published"] is None


async def test_a_date_in_the_pages_header_or_navigation_is_not_the_articles() -> None:
    for furniture in ("header", "nav", "footer", "aside"):
        body = f"<{furniture}><p>Monday, March 4, 2024</p></{furniture}><h1>Harbour to grow</h1>{ARTICLE}"
        assert (await metadata_of(page(body=body)))["published"] is None, furniture


async def test_a_date_far_below_the_headline_or_in_a_long_paragraph_is_not_the_byline() -> None:
    filler = "".join(f"<p>Paragraph {n} of the story.</p>" for n in range(12))
    far = f"<h1>Harbour to grow</h1>{filler}<p>March 4, 2024</p>"
    assert (await metadata_of(page(body=far)))["published"] is None
    long = f"<h1>Harbour to grow</h1><p>{'The plan was first drawn up on March 4, 2019, ' * 6}</p>"
    assert (await metadata_of(page(body=long)))["published"] is None


async def test_a_declared_date_wins_over_the_byline() -> None:
    head = '<meta property="article:published_time" content="2024-01-05">'
    body = f"<h1>Harbour to grow</h1><p>March 4, 2024</p>{ARTICLE}"
    found = await metadata_of(page(head, body))
    assert (found["published"], found["sources"]["published"]) == ("2024-01-05", "opengraph")


# Microdata on visible elements


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(days, st.integers(0, 6), st.sampled_from(["span", "div", "p", "strong"]))
async def test_item_date_published_on_an_element_without_content_is_read_from_its_text(
    day: dt.date, form: int, tag: str
) -> None:
    element = f"<{tag} itemprop='datePublished'>{written(day, form)}</{tag}>"
    body = f"<article><h2>Harbour</h2><p>Posted: {element}</p>{ARTICLE}</article>"
    found = await metadata_of(page(body=body))
    assert (found["published"], found["sources"]["published"]) == (day.isoformat(), "html")


async def test_item_date_published_with_content_or_datetime_reads_the_attribute() -> None:
    for attribute in ("content", "datetime"):
        body = (
            f"<div itemprop='datePublished' {attribute}='2023-01-07T08:00:00Z'>Last Saturday</div>{ARTICLE}"
        )
        found = await metadata_of(page(body=body))
        assert (found["published"], found["sources"]["published"]) == ("2023-01-07T08:00:00Z", "meta"), (
            attribute
        )


async def test_item_date_published_in_the_furniture_or_not_a_date_gives_none() -> None:
    for body in (
        f"<aside><span itemprop='datePublished'>March 4, 2024</span></aside>{ARTICLE}",
        f"<span itemprop='datePublished'>last week</span>{ARTICLE}",
        f"<span itemprop='dateModified'>March 4, 2024</span>{ARTICLE}",
    ):
        assert (await metadata_of(page(body=body)))["published"] is None, body


# How journals and meta tags write dates


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(days)
async def test_citation_publication_date_written_year_month_day(day: dt.date) -> None:
    for value in (
        f"{day.year} {MONTHS[day.month - 1][:3]} {day.day}",
        f"{day.year} {MONTHS[day.month - 1]} {day.day}",
    ):
        found = await metadata_of(page(f'<meta name="citation_publication_date" content="{value}">'))
        assert (found["published"], found["sources"]["published"]) == (day.isoformat(), "highwire"), value


@pytest.mark.parametrize(
    "raw",
    [
        "2024-03-01T10:00:00+99:00",
        "2024-03-01T10:00:00+15:00",
        "2024-03-01T10:00:00-14:30",
        "2024-03-01T10:00:00+05:60",
        "Fri, 01 Mar 2024 10:00:00 +9900",
        "March 1, 2024 10:00 +25:00",
    ],
)
def test_a_time_with_an_impossible_zone_is_no_date(raw: str) -> None:
    assert iso_date(raw) is None


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2025, 1, 1)),
    st.integers(-14 * 60, 14 * 60).filter(lambda minutes: minutes % 15 == 0),
)
def test_a_time_with_a_real_zone_keeps_it(moment: dt.datetime, minutes: int) -> None:
    sign = "+" if minutes >= 0 else "-"
    zone = f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%S")
    expected = stamp + ("Z" if minutes == 0 else zone)
    assert iso_date(stamp + zone) == expected


async def test_a_declared_date_with_an_impossible_zone_gives_way_to_the_next_declaration() -> None:
    head = (
        '<meta property="article:published_time" content="2024-03-01T10:00:00+99:00">'
        '<meta name="date" content="2024-02-28">'
    )
    found = await metadata_of(page(head))
    assert (found["published"], found["sources"]["published"]) == ("2024-02-28", "meta")


def test_dotted_dates_are_day_month_year_and_never_impossible() -> None:
    assert date_in_text("Stand: 07.01.2023, 10:00 Uhr") == "2023-01-07"
    assert date_in_text("Version 1.2.2023") == "2023-02-01"
    assert date_in_text("31.02.2023") is None
    assert date_in_text("13.13.2023") is None
    assert date_in_text("v3.10.2023.1") is None


# canonical_url and the guardian's address policy


@pytest.mark.parametrize(
    "href",
    [
        "https://127.0.0.2/a",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::1]/a",
        "https://[::ffff:127.0.0.2]/a",
        "https://10.0.0.8/a",
        "https://192.168.1.1/a",
        "https://[fe80::1]/a",
        "https://0.0.0.0/a",
        "https://[64:ff9b::a00:1]/a",
    ],
)
async def test_a_canonical_url_at_an_internal_address_is_dropped(href: str) -> None:
    for head in (f'<link rel="canonical" href="{href}">', f'<meta property="og:url" content="{href}">'):
        assert (await metadata_of(page(head)))["canonical_url"] is None, head


async def test_a_canonical_url_at_a_public_address_or_name_is_kept() -> None:
    for href, expected in (
        ("https://93.184.216.34/a", "https://93.184.216.34/a"),
        ("https://[2606:2800:220:1::1]/a", "https://[2606:2800:220:1::1]/a"),
        ("https://news.example.test/b", "https://news.example.test/b"),
    ):
        assert (await metadata_of(page(f'<link rel="canonical" href="{href}">')))["canonical_url"] == expected


async def test_a_page_served_from_an_allowed_internal_address_keeps_its_own_canonical_url() -> None:
    # The guardian let the page be fetched there (an operator allow range): the same address is no
    # new destination; another internal address is.
    url = "https://127.0.0.1:8443/news/a"
    same = await metadata_of(page('<link rel="canonical" href="/news/b">'), url)
    assert same["canonical_url"] == "https://127.0.0.1:8443/news/b"
    other = await metadata_of(page('<link rel="canonical" href="https://127.0.0.2:8443/news/b">'), url)
    assert other["canonical_url"] is None
