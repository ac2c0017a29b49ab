"""extract="main": the article without the page around it, and the full text when there is none."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.reader.document import Document, build_document
from jobs.reader.html.reduce import reduce_all
from jobs.reader.main_content import select_main

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


def page(content: str, title: str = "River path - Town News") -> str:
    return (
        f"<html><head><title>{title}</title></head><body>"
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


LONG_BODY = "".join(f"<p>{p}</p>" for p in PARAGRAPHS * 4)


async def test_the_headline_the_title_already_carries_is_not_repeated_in_the_text() -> None:
    for title in (
        "River path to grow - Town News",
        "Town News | River path to grow",
        "River path to grow: council votes for two more kilometres",
        "Town News: river path set to grow",  # the same words, nearly: "set" is new
    ):
        document = await main_of(page(article(), title=title))
        assert document.extraction == "main", title
        assert document.title == title
        assert document.text == "\n".join(PARAGRAPHS), title


async def test_a_headline_the_title_does_not_carry_stays_at_the_top_of_the_text() -> None:
    for title in ("Town News", "Council budget 2024 - Town News", ""):
        document = await main_of(page(article(), title=title))
        assert document.text == "River path to grow\n" + "\n".join(PARAGRAPHS), title


async def test_a_blog_post_whose_title_links_to_its_own_page_is_the_main_content() -> None:
    # Blogs link the post's heading to its permalink: that card is the post, not a teaser for
    # another page, though it looks like one.
    post = (
        '<div class=post><h2><a href="/2015/08/river-path">River path to grow</a></h2>'
        f"<p>3 August 2015</p><p>{PARAGRAPHS[0]}</p><p>{PARAGRAPHS[1]}</p></div>"
    )
    document = await main_of(page(post, title="Town blog » River path to grow"))
    assert document.extraction == "main"
    assert document.text.endswith(PARAGRAPHS[0] + "\n" + PARAGRAPHS[1])
    assert "Section 3" not in document.text


async def test_a_pitch_and_a_bio_written_as_plain_paragraphs_after_the_text_are_left_out() -> None:
    # No class names to go by: what follows the element that holds the article's text, in
    # elements of its own, is furniture however much it reads like prose.
    pitch = (
        "<div><p>Get the best of Town News in your inbox every morning: sign up for our free "
        "newsletter.</p></div>"
    )
    bio = "<div><p>Jane Doe writes about the council, its budgets and the river for Town News.</p></div>"
    html = page(f"<article><h1>River path to grow</h1><div>{LONG_BODY}</div>{pitch}{bio}</article>")
    document = await main_of(html)
    assert document.extraction == "main"
    assert "newsletter" not in document.text
    assert "Jane Doe" not in document.text
    assert document.text.endswith(PARAGRAPHS[3])


async def test_a_table_and_code_after_the_text_stay() -> None:
    standfirst = "<p>The extension, approved on Tuesday, adds two kilometres along the old mill race.</p>"
    table = (
        "<div><table><tr><th>Year</th><th>Length</th></tr><tr><td>2023</td><td>4 km</td></tr></table></div>"
    )
    code = "<div><pre>path.extend(km=2)</pre></div>"
    html = page(
        f"<article><h1>River path to grow</h1>{standfirst}<div>{LONG_BODY}</div>{table}{code}</article>"
    )
    document = await main_of(html)
    assert document.extraction == "main"
    assert document.text.endswith(PARAGRAPHS[3] + "\nYear\tLength\n2023\t4 km\npath.extend(km=2)")


async def test_a_byline_and_a_date_between_the_standfirst_and_the_text_are_left_out() -> None:
    standfirst = "The extension, approved on Tuesday, adds two kilometres along the old mill race."
    byline = "<div><span>By Jane Doe</span></div><div>12 March 2024</div>"
    head = f"<h1>River path to grow</h1><p>{standfirst}</p>{byline}"
    document = await main_of(page(f"<article>{head}<div>{LONG_BODY}</div></article>"))
    assert document.extraction == "main"
    assert "Jane Doe" not in document.text
    assert "12 March" not in document.text
    assert document.text.startswith(f"River path to grow\n{standfirst}\n{PARAGRAPHS[0]}")


async def test_a_short_news_item_among_navigation_is_the_main_content() -> None:
    item = f"<h1>Path closed on Sunday</h1><p>{PARAGRAPHS[0]}</p>"
    document = await main_of(page(item))
    assert document.extraction == "main"
    assert document.text == "Path closed on Sunday\n" + PARAGRAPHS[0]


async def test_a_short_choice_that_leaves_out_a_page_of_plain_text_falls_back_to_the_full_text() -> None:
    # A results page: one paragraph of prose above a long table. The paragraph is not the page.
    rows = "".join(
        f"<tr><td>Runner number {i}</td><td>{30 + i}:{i % 60:02d} min</td></tr>" for i in range(60)
    )
    html = page(f"<h1>Town run results</h1><div><p>{PARAGRAPHS[0]}</p></div><div><table>{rows}</table></div>")
    document = await main_of(html)
    assert document.extraction == "full"
    assert "Runner number 59\t89:59 min" in document.text
    assert PARAGRAPHS[0] in document.text


async def test_text_blocks_that_a_page_builder_names_all_alike_are_all_kept() -> None:
    # Page builders wrap every text block in "...-widget" or the like; a name that every
    # paragraph carries says nothing about which of them is furniture.
    short = "The path will be lit at night from October, the council said."
    widgets = "".join(
        f'<div class="builder-widget builder-text"><p>{text}</p></div>'
        for text in [*PARAGRAPHS[:2], short, *PARAGRAPHS[2:]]
    )
    document = await main_of(page(f"<article><h1>River path to grow</h1>{widgets}</article>"))
    assert document.extraction == "main"
    assert document.text == "\n".join(["River path to grow", *PARAGRAPHS[:2], short, *PARAGRAPHS[2:]])


async def test_a_long_caption_in_a_part_named_for_captions_is_left_out() -> None:
    caption = (
        "Walkers and cyclists share the old towpath near the mill on a winter morning, where the "
        "council plans to add lighting, benches and a second bridge over the race. Photo: Town News"
    )
    body = "".join(f"<p>{p}</p>" for p in PARAGRAPHS[:2])
    rest = "".join(f"<p>{p}</p>" for p in PARAGRAPHS[2:])
    named = f"<div class=photo-caption><p>{caption}</p></div>"
    html = page(f"<article><h1>River path to grow</h1>{body}{named}{rest}</article>")
    document = await main_of(html)
    assert document.extraction == "main"
    assert "towpath" not in document.text
    assert document.text == "River path to grow\n" + "\n".join(PARAGRAPHS)


SENTENCES = st.sampled_from([*PARAGRAPHS, "Short line.", "By Jane Doe", "Share this", "12 March 2024"])
CLASSES = st.sampled_from(["", "content", "byline", "share", "author-bio", "related", "post", "sidebar"])


@st.composite
def fragments(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(
        st.sampled_from(["p", "h2", "link", "list", "table", "div", "article", "nav", "aside", "footer"])
    )
    if kind == "p" or depth >= 3:
        return f"<p>{draw(SENTENCES)}</p>"
    if kind == "h2":
        return f"<h2>{draw(SENTENCES)[:40]}</h2>"
    if kind == "link":
        return f'<p><a href="/x">{draw(SENTENCES)}</a></p>'
    if kind == "list":
        return "<ul>" + "".join(f"<li>{s}</li>" for s in draw(st.lists(SENTENCES, max_size=4))) + "</ul>"
    if kind == "table":
        return (
            "<table><tr>"
            + "".join(f"<td>{s}</td>" for s in draw(st.lists(SENTENCES, max_size=3)))
            + "</tr></table>"
        )
    inner = "".join(draw(st.lists(fragments(depth + 1), max_size=5)))
    return f'<{kind} class="{draw(CLASSES)}">{inner}</{kind}>'


@settings(max_examples=150, deadline=None)
@given(st.lists(fragments(), min_size=1, max_size=6), st.sampled_from(["", "River path to grow - News"]))
def test_main_is_always_the_page_s_own_blocks_in_order_or_the_full_text(parts: list[str], title: str) -> None:
    reduction = reduce_all(f"<title>{title}</title>" + "".join(parts))
    selection = select_main(reduction)
    full = [block.text for block in reduction.blocks]
    chosen = [block.text for block in selection.blocks]
    if selection.extraction == "full":
        assert chosen == full
    else:
        assert selection.extraction == "main"
        assert chosen
        remaining = iter(full)
        assert all(any(text == other for other in remaining) for text in chosen)


@pytest.mark.parametrize("junk", ["<p>Short line.</p>", "<div><p>By Jane Doe</p></div>", ""])
async def test_main_text_never_comes_back_empty_when_the_page_has_text(junk: str) -> None:
    document = await main_of(f"<html><body>{junk}<p>Some words.</p></body></html>")
    assert document.text.strip()
