"""Main content on the classes of page it used to lose: a short article among a page's menus and
footer text, a programme of links under a short intro, and the index pages that must still fall
back. Each is a generated family, never one page; the oracle is the page the test built: which
of its parts are the article's."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.reader.document import Document, build_document

SENTENCES = [
    "The company reported revenue of four million for the quarter, up a tenth on the year.",
    "Its new plant in the north opened in May and now employs two hundred people.",
    "The board proposed a dividend of twelve cents a share, payable in October.",
    "Orders for the coming quarter are in line with the outlook given in the spring.",
    "The chief executive said the company would keep investing in its own software.",
]
MENU = "".join(f'<li><a href="/section/{n}">Section {n}</a></li>' for n in range(30))
# Footer text outside any <footer>: plain paragraphs in plain divs, as many sites write them.
SITE_TEXT = (
    "Example Holdings is a group of companies that make parts for the car, rail and aircraft "
    "industries in twelve countries, with head offices in Springfield and Shelbyville. "
)


async def main_of(html: str, fmt: str = "text") -> Document:
    return await build_document(
        html.encode(),
        "text/html; charset=utf-8",
        "https://news.example/release",
        extract="main",
        max_chars=100_000,
        cpu_budget_s=5.0,
        body_truncated=False,
        format=fmt,
    )


def shell(content: str, *, site_text: int, title: str = "Quarterly results - Example") -> str:
    blurb = "".join(f"<div class=site-info><p>{SITE_TEXT}</p></div>" for _ in range(site_text))
    return (
        f"<html><head><title>{title}</title></head><body>"
        f"<div class=top><ul>{MENU}</ul></div>{content}<div class=bottom>{blurb}<ul>{MENU}</ul></div>"
        "</body></html>"
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 5), st.integers(0, 3), st.booleans())
async def test_a_short_article_is_the_main_content_among_up_to_four_times_its_text_around_it(
    sentences: int, site_text: int, headline: bool
) -> None:
    text = " ".join(SENTENCES[:sentences])
    head = "<h1>Example reports its quarter</h1>" if headline else ""
    document = await main_of(shell(f"<article>{head}<p>{text}</p></article>", site_text=site_text))
    assert document.extraction == "main"
    assert text in document.text
    assert "Section 3" not in document.text and "Springfield" not in document.text


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3, 12))
async def test_a_page_of_several_articles_still_falls_back_to_the_full_text(count: int) -> None:
    cards = "".join(
        f"<article><h2><a href='/s/{n}'>Story {n} about the quarter</a></h2>"
        f"<p>{SENTENCES[n % 5]}</p></article>"
        for n in range(count)
    )
    document = await main_of(shell(f"<main><h1>Latest</h1>{cards}</main>", site_text=0))
    assert document.extraction == "full"
    assert all(f"Story {n} about the quarter" in document.text for n in range(count))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(6, 30), st.sampled_from(["article", "main"]), st.booleans(), st.booleans())
async def test_a_programme_of_links_under_a_short_intro_is_kept_as_the_main_content(
    items: int, element: str, heading: bool, described: bool
) -> None:
    intro = "This year's festival brings forty films from twelve countries to the old town."
    country = " (Norway, 2024)" if described else ""
    entries = "".join(
        f"<li><a href='/film/{n}'>Film {n}: a story of the sea</a>{country}</li>" for n in range(items)
    )
    label = "<h2>Programme</h2>" if heading else ""
    content = f"<{element}><h1>Festival programme</h1><p>{intro}</p>{label}<ul>{entries}</ul></{element}>"
    document = await main_of(shell(content, site_text=0, title="Festival programme"), "markdown")
    assert document.extraction == "main"
    assert intro.replace("'", "\\'") in document.text or intro in document.text
    for n in range(items):
        assert f"- [Film {n}: a story of the sea][" in document.text, n
    assert "Section 3" not in document.text


async def test_a_list_of_related_links_after_an_articles_prose_still_goes() -> None:
    prose = "".join(f"<p>{sentence}</p>" for sentence in SENTENCES)
    related = (
        "<h2>Related</h2><ul>"
        + "".join(f"<li><a href='/r/{n}'>Another story {n}</a></li>" for n in range(6))
        + "</ul>"
    )
    document = await main_of(shell(f"<article><h1>Results</h1>{prose}{related}</article>", site_text=2))
    assert document.extraction == "main"
    assert SENTENCES[4] in document.text and "Another story" not in document.text
