"""extract="main": the article without the page around it, and the full text when there is none."""

from __future__ import annotations

from jobs.reader.document import Document, build_document

PARAGRAPHS = [
    "The council voted on Tuesday to extend the river path by two kilometres, after a year of "
    "consultation with residents, walkers and the cycling club.",
    "Work will start in spring, the mayor said, and the new section should open before the summer "
    "holidays, weather permitting, with lighting added in the autumn.",
    "Residents near the old mill raised concerns about parking, which the plan addresses with a "
    "small car park at the northern end and a bus stop at the bridge.",
    "The budget, just under two million, comes from the regional transport fund and a grant for "
    "projects that make walking and cycling safer for children.",
]
NAV = "".join(f'<li><a href="/section/{i}">Section {i}</a></li>' for i in range(40))
FOOTER = "".join(f'<li><a href="/legal/{i}">Legal page {i}</a></li>' for i in range(25))


async def main_of(html: str, *, max_chars: int = 40_000) -> Document:
    return await build_document(
        html.encode(),
        "text/html; charset=utf-8",
        "https://news.example/story",
        extract="main",
        max_chars=max_chars,
        cpu_budget_s=3.0,
        body_truncated=False,
    )


def article(extra: str = "") -> str:
    body = "".join(f"<p>{p}</p>" for p in PARAGRAPHS)
    return f"<article><h1>River path to grow</h1>{body}{extra}</article>"


def page(content: str) -> str:
    return (
        "<html><head><title>River path - Town News</title></head><body>"
        f"<header><div class=logo>Town News</div><nav><ul>{NAV}</ul></nav></header>"
        f"<main>{content}</main>"
        f"<aside><h2>Most read</h2><ul>{NAV}</ul></aside>"
        f"<footer><ul>{FOOTER}</ul><p>Copyright Town News. All rights reserved.</p></footer>"
        "</body></html>"
    )


async def test_an_article_with_heavy_navigation_and_footer_gives_the_article() -> None:
    document = await main_of(page(article()))
    assert document.extraction == "main"
    assert document.text == "River path to grow\n" + "\n".join(PARAGRAPHS)
    assert document.title == "River path - Town News"
    assert "https://news.example/section/1" in document.links


async def test_full_extraction_keeps_everything_readable() -> None:
    document = await build_document(
        page(article()).encode(),
        "text/html",
        "https://news.example/story",
        extract="full",
        max_chars=40_000,
        cpu_budget_s=3.0,
        body_truncated=False,
    )
    assert document.extraction == "full"
    assert "Section 3" in document.text
    assert "Copyright Town News" in document.text
    assert PARAGRAPHS[2] in document.text


async def test_an_index_page_falls_back_to_the_full_text() -> None:
    teasers = "".join(
        f'<div class=card><h3><a href="/story/{i}">Story number {i} about the town and its river</a></h3>'
        f"<p>A short summary of story {i}, a line or two long.</p></div>"
        for i in range(30)
    )
    document = await main_of(page(f"<h1>Latest news</h1>{teasers}"))
    assert document.extraction == "full"
    assert "Story number 17 about the town and its river" in document.text


async def test_a_page_that_is_not_an_article_never_comes_back_empty() -> None:
    rows = "".join(f"<tr><th>Field {i}</th><td>Value {i}</td></tr>" for i in range(30))
    document = await main_of(page(f"<h1>Registry record 4711</h1><table>{rows}</table>"))
    assert document.extraction == "full"
    assert "Field 29\tValue 29" in document.text


async def test_tables_and_code_inside_the_article_are_kept() -> None:
    table = "<table><tr><th>Year</th><th>Length</th></tr><tr><td>2023</td><td>4 km</td></tr></table>"
    code = "<pre>path.extend(km=2)\n    .light(season='autumn')</pre>"
    headed = "<h2>Figures</h2><ul><li>Cost: 1.9 million</li><li>Length: 2 km</li></ul>"
    document = await main_of(page(article(table + code + headed)))
    assert document.extraction == "main"
    assert "Year\tLength\n2023\t4 km" in document.text
    assert "path.extend(km=2)\n    .light(season='autumn')" in document.text
    assert "Figures\nCost: 1.9 million\nLength: 2 km" in document.text


async def test_a_consent_banner_is_dropped() -> None:
    banner = (
        '<div id="cookie-consent" class="cmp-banner"><p>We use cookies and similar technologies to '
        "improve your experience, measure audiences and show personalised advertising.</p>"
        "<button>Accept all</button><button>Settings</button></div>"
    )
    document = await main_of(page(banner + article()))
    assert document.extraction == "main"
    assert "cookies" not in document.text
    assert "Accept all" not in document.text
    assert PARAGRAPHS[0] in document.text


async def test_reader_comments_are_not_the_main_content() -> None:
    comments = '<section id="comments"><h2>3 comments</h2>' + "".join(
        f"<div class=comment><p>Reader {i} wrote a long reply about parking, buses, bridges and the "
        "budget, with opinions on every part of the plan and then some more.</p></div>"
        for i in range(12)
    )
    document = await main_of(page(article() + comments + "</section>"))
    assert document.extraction == "main"
    assert "Reader 3 wrote" not in document.text
    assert PARAGRAPHS[3] in document.text


async def test_teasers_for_other_stories_are_not_part_of_the_article() -> None:
    rail = "<div class=rail>" + "".join(
        f'<div><h3><a href="/other/{i}">Another story headline number {i}</a></h3>'
        f"<p>The blurb of another story, long enough to read like a paragraph of prose text {i}.</p></div>"
        for i in range(6)
    )
    document = await main_of(page(article() + rail + "</div>"))
    assert document.extraction == "main"
    assert "blurb of another story" not in document.text
    assert PARAGRAPHS[1] in document.text


async def test_the_cap_applies_after_selection_so_boilerplate_cannot_crowd_out_the_article() -> None:
    huge_nav = "<nav><ul>" + "".join(f'<li><a href="/n/{i}">Menu entry {i}</a></li>' for i in range(3000))
    document = await main_of(huge_nav + "</ul></nav>" + article(), max_chars=400)
    assert document.text.startswith("River path to grow\n" + PARAGRAPHS[0])
    assert document.truncated


async def test_a_form_around_the_whole_page_is_the_page_not_a_form() -> None:
    # ASP.NET pages and forums wrap everything in one <form>; its article is still the article.
    document = await main_of("<form id=aspnetForm>" + page(article()) + "</form>")
    assert document.extraction == "main"
    assert document.text == "River path to grow\n" + "\n".join(PARAGRAPHS)


async def test_a_header_left_unclosed_does_not_swallow_the_article() -> None:
    html = (
        "<html><body><header><div class=logo>Town News</div>"
        f"<nav><ul>{NAV}</ul></nav>{article()}"
        f"<footer><ul>{FOOTER}</ul></footer></body></html>"
    )
    document = await main_of(html)
    assert document.extraction == "main"
    assert document.text == "River path to grow\n" + "\n".join(PARAGRAPHS)


async def test_a_related_links_block_inside_the_article_goes_with_its_heading() -> None:
    related = (
        "<h2>More on this</h2><ul>"
        + "".join(f'<li><a href="/more/{i}">Another river story number {i}</a></li>' for i in range(5))
        + "</ul>"
    )
    body = "".join(f"<p>{p}</p>" for p in PARAGRAPHS)
    document = await main_of(
        page(f"<article><h1>River path to grow</h1>{body[:-4]}{related}{body}</article>")
    )
    assert document.extraction == "main"
    assert "More on this" not in document.text
    assert "Another river story" not in document.text
    assert PARAGRAPHS[3] in document.text


async def test_an_author_bio_after_the_last_paragraph_is_dropped_however_long() -> None:
    bio = (
        "<div class=author-bio><p>Jane Doe has covered the town council, its budgets and its "
        "rivers for twenty years, and before that wrote about farming, weather and the regional "
        "railway for a paper that no longer exists.</p></div>"
    )
    document = await main_of(page(article(bio)))
    assert document.extraction == "main"
    assert "Jane Doe" not in document.text
    assert document.text.endswith(PARAGRAPHS[3])


async def test_the_headline_and_standfirst_stay_and_the_byline_between_them_and_the_body_goes() -> None:
    standfirst = "The extension, approved on Tuesday, adds two kilometres along the old mill race."
    head = (
        f"<h1>River path to grow</h1><h2>{standfirst}</h2>"
        "<figure><img src=a.jpg><figcaption>The path in winter.</figcaption></figure>"
        "<div>By Jane Doe</div><div>12 March 2024</div>"
    )
    body = "<div class=body>" + "".join(f"<p>{p}</p>" for p in PARAGRAPHS) + "</div>"
    document = await main_of(page(head + body + f"<ul>{NAV}</ul>"))
    assert document.extraction == "main"
    assert document.text == "\n".join(["River path to grow", standfirst, *PARAGRAPHS])
