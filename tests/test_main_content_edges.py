"""Main content at its edges, on two classes of page it used to lose: a report whose title line
stands before its body (in bold, in a part named for a title, a heading outside the text's element,
role=heading, a <header> of a section), and a reply box or sign-in notice whose sentences outweigh
a short article. Each is a generated family, never one page; the oracle is the page the test
built: which of its parts are the article's."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_main_content_classes import SENTENCES, main_of, shell

TITLE = "Annual report of the board for 2023"
# Each way a page writes its title line, with the Markdown prefix it must come out with.
TITLE_LINES = {
    "bold": (f"<p><b>{TITLE}</b></p>", ""),
    "strong": (f"<div><strong>{TITLE}</strong></div>", ""),
    "named": (f"<div class=report-title>{TITLE}</div>", ""),
    "heading outside": (f"<div class=head><h1>{TITLE}</h1></div>", "# "),
    "role heading": (f"<div role=heading aria-level=2>{TITLE}</div>", "## "),
    "div in heading": (f"<h1><div class=t>{TITLE}</div></h1>", "# "),
    "section header": (f"<header><h2>{TITLE}</h2></header>", "## "),
}
NOTICE = (
    "You must <a href='/login/'>log in</a> or <a href='/register/'>register</a> to reply here. Only "
    "registered members can see links and attachments in this forum; read the rules first."
)
REPLY_BOX = (
    "<h3>Leave a Reply</h3><p>Your email address will not be published. Required fields are marked "
    "with a star, and every comment is read by a moderator before it appears.</p>"
    "<form action='/comments/post' method=post><p>Comment</p><textarea name=comment></textarea>"
    "<p>Name</p><input name=author><p>Email</p><input name=email></form>"
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(TITLE_LINES)),
    st.integers(2, 4),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["section", "div"]),
)
async def test_a_reports_title_line_before_its_body_is_kept_and_marked_as_the_page_marks_it(
    form: str, sentences: int, one_paragraph: bool, dated: bool, wrapper: str
) -> None:
    line, prefix = TITLE_LINES[form]
    if form == "section header":
        wrapper = "section"  # a <header> outside any section is the page's banner
    text = SENTENCES[:sentences]
    body = f"<p>{' '.join(text)}</p>" if one_paragraph else "".join(f"<p>{s}</p>" for s in text)
    date = "<div>12 May 2024</div>" if dated else ""
    content = f"<{wrapper} class=report>{line}{date}<div class=text>{body}</div></{wrapper}>"
    document = await main_of(shell(content, title="Example Holdings", site_text=0), "markdown")
    assert document.extraction == "main"
    assert f"\n{prefix}{TITLE}\n" in f"\n{document.text}\n"
    assert all(sentence in document.text for sentence in text)
    assert "Section 3" not in document.text and "Springfield" not in document.text


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(TITLE_LINES)), st.integers(2, 4))
async def test_a_title_line_the_page_title_repeats_goes_like_a_headline(form: str, sentences: int) -> None:
    line, _ = TITLE_LINES[form]
    text = " ".join(SENTENCES[:sentences])
    content = f"<div class=report>{line}<div class=text><p>{text}</p></div></div>"
    document = await main_of(shell(content, title=f"{TITLE} - Example Holdings", site_text=1), "markdown")
    assert document.extraction == "main"
    assert TITLE not in document.text and text in document.text


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 4), st.sampled_from(["b", "strong"]))
async def test_a_bold_byline_under_a_headline_stays_out(sentences: int, bold: str) -> None:
    text = " ".join(SENTENCES[:sentences])
    byline = f"<p><{bold}>By Ann Smith, Springfield</{bold}></p>"
    content = f"<div class=head><h1>{TITLE}</h1>{byline}</div><div class=text><p>{text}</p></div>"
    document = await main_of(shell(content, title="Example Holdings", site_text=1), "markdown")
    assert document.extraction == "main"
    assert f"# {TITLE}" in document.text and text in document.text
    assert "Ann Smith" not in document.text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["reply box", "sign-in notice"]),
    st.integers(2, 3),
    st.booleans(),
    st.sampled_from(["box", "block", "c2"]),
    st.booleans(),
)
async def test_a_reply_box_or_sign_in_notice_is_never_chosen_over_a_short_article(
    kind: str, sentences: int, before: bool, name: str, headline: bool
) -> None:
    text = " ".join(SENTENCES[:sentences])
    head = "<h1>Example reports its quarter</h1>" if headline else ""
    article = f"<div class=a>{head}<p>{text}</p></div>"
    box = f"<div class={name}>{REPLY_BOX if kind == 'reply box' else f'<p>{NOTICE}</p>'}</div>"
    content = box + article if before else article + box
    document = await main_of(shell(content, title="Quarterly results - Example", site_text=0))
    assert document.extraction == "main"
    assert text in document.text
    assert "Leave a Reply" not in document.text and "log in" not in document.text
    assert "email address" not in document.text and "Section 3" not in document.text


async def test_a_contact_pages_intro_over_its_form_is_still_read() -> None:
    intro = (
        "Write to the press office with your question and we will answer within two working days; "
        "for urgent matters call the number below."
    )
    form = "<form><p>Message</p><textarea></textarea></form>"
    content = f"<main><h1>Contact the press office</h1><p>{intro}</p>{form}</main>"
    document = await main_of(shell(content, title="Contact - Example", site_text=0))
    assert intro in document.text


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["related-work", "nav_summary", "share-results", "comments-policy"]),
    st.sampled_from(
        ["<p><a href='/shop/x'>Buy the kit</a></p>", "<form><button>Print</button><p>Print</p></form>"]
    ),
    st.booleans(),
)
async def test_a_heading_stays_over_its_text_whatever_its_anchor_id_says_and_over_a_lone_button(
    anchor: str, button: str, in_header: bool
) -> None:
    prose = "".join(f"<p>{sentence}</p>" for sentence in SENTENCES)
    heading = f"<h2 id={anchor}>What the quarter brought</h2>"
    if in_header:
        heading = f"<header>{heading}{button}</header>"
    else:
        heading += button
    section = f"<section class=part>{heading}<p>{SENTENCES[0]} {SENTENCES[1]}</p></section>"
    content = f"<article><h1>Results</h1>{prose}{section}</article>"
    document = await main_of(shell(content, title="Quarterly results - Example", site_text=0), "markdown")
    assert document.extraction == "main"
    assert "\n## What the quarter brought\n" in document.text
    assert "Buy the kit" not in document.text and "Section 3" not in document.text
