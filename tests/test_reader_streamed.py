"""Content a page's script puts in place while it streams (React's ``$RC``/``$RS``), and declarative
shadow roots: read where the browser shows them, not dropped as hidden or inert.

The oracle is the page as a browser shows it once the script has run: written out by hand for
the fixed pages, and, for the generated family, built by the test itself (the segment's
paragraphs put where its placeholder stands) and read through the same reader, so the streamed
page must read exactly as its already-assembled twin.
"""

from __future__ import annotations

import html as html_lib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.reader.document import build_document
from jobs.reader.html.reduce import reduce_all

URL = "https://news.example.test/a"
PROSE = "The council approved the new budget after a long debate about schools and roads in town."
MORE = "Spending on libraries rises by a tenth, and the bus routes to the north end are kept."

RUNTIME = "<script>$RC=function(b,c){/* moves c into b */};</script>"


async def read(page: str, **kwargs: Any) -> tuple[str, str, int]:
    document = await build_document(
        page.encode(),
        "text/html; charset=utf-8",
        URL,
        extract=kwargs.pop("extract", "full"),
        max_chars=100_000,
        cpu_budget_s=10.0,
        body_truncated=False,
        format=kwargs.pop("format", "text"),
    )
    return document.text, document.extraction, document.hidden_removed


def streamed(segment: str, call: str, placeholder: str = "B:0") -> str:
    return (
        "<html><body><nav><a href='/'>Home</a> <a href='/world'>World</a></nav>"
        f"<main><article><h1>Budget passes</h1><!--$?--><template id='{placeholder}'></template>"
        "<!--/$--><p>Filed by the city desk.</p></article></main><footer>© Example News</footer>"
        f"{RUNTIME}<div hidden id='{segment}'><p>{PROSE}</p><p>{MORE}</p></div>"
        f"<script>{call}</script></body></html>"
    )


async def test_a_completed_boundary_is_read_where_its_placeholder_stands() -> None:
    text, _, hidden = await read(streamed("S:0", '$RC("B:0","S:0")'))
    assert text.split("\n") == [
        "Home World",
        "Budget passes",
        PROSE,
        MORE,
        "Filed by the city desk.",
        "© Example News",
    ]
    assert hidden == 0


async def test_a_boundary_and_its_segment_may_carry_different_numbers() -> None:
    text, _, _ = await read(streamed("S:3", '$RC("B:0","S:3")'))
    assert text.index(PROSE) < text.index("Filed by")


async def test_a_filled_segment_placeholder_is_read_in_place() -> None:
    text, _, _ = await read(streamed("S:1", '$RS("S:1","P:1")', placeholder="P:1"))
    assert text.index("Budget passes") < text.index(PROSE) < text.index("Filed by")


async def test_a_boundary_completed_with_styles_is_read_in_place() -> None:
    text, _, _ = await read(streamed("S:0", '$RR("B:0","S:0",[["/a.css"]])'))
    assert text.index("Budget passes") < text.index(PROSE) < text.index("Filed by")


async def test_main_mode_finds_the_streamed_article_and_drops_the_shell() -> None:
    text, extraction, _ = await read(streamed("S:0", '$RC("B:0","S:0")'), extract="main")
    assert extraction == "main"
    assert PROSE in text and MORE in text
    assert "Home" not in text and "© Example News" not in text


async def test_a_segment_no_script_moves_stays_hidden_and_counted() -> None:
    page = streamed("S:0", '$RC("B:0","S:0")').replace("id='S:0'", "id='S:9'")
    text, _, hidden = await read(page)
    assert PROSE not in text
    assert hidden == len(PROSE) + len(MORE)


async def test_a_streamed_id_without_any_call_stays_hidden() -> None:
    page = f"<p>Shown.</p><div hidden id='S:0'><p>{PROSE}</p></div><template id='B:0'></template>"
    text, _, hidden = await read(page)
    assert text == "Shown."
    assert hidden == len(PROSE)


async def test_a_segment_hidden_by_its_style_too_stays_hidden() -> None:
    page = streamed("S:0", '$RC("B:0","S:0")').replace(
        "<div hidden id='S:0'>", "<div hidden id='S:0' style='display:none'>"
    )
    text, _, _ = await read(page)
    assert PROSE not in text


async def test_streamed_markdown_keeps_the_segments_structure() -> None:
    page = (
        "<main><h1>Steps</h1><template id='B:0'></template></main>"
        "<div hidden id='S:0'><h2>How</h2><ul><li>First step</li><li>Second step</li></ul></div>"
        '<script>$RC("B:0","S:0")</script>'
    )
    assembled = (
        "<main><h1>Steps</h1><div><h2>How</h2><ul><li>First step</li><li>Second step</li></ul></div></main>"
    )
    markdown, _, _ = await read(page, format="markdown")
    assert markdown == (await read(assembled, format="markdown"))[0]
    assert markdown.startswith("# Steps\n\n## How\n\n- First step\n")


@st.composite
def streamed_pages(draw: st.DrawFn) -> tuple[str, str]:
    """A page with 1-3 boundaries filled out of order, and the same page already assembled."""
    count = draw(st.integers(1, 3))
    words = st.text("abcdefghij", min_size=3, max_size=8)
    contents = [
        [" ".join(draw(st.lists(words, min_size=2, max_size=5))) for _ in range(draw(st.integers(1, 3)))]
        for _ in range(count)
    ]
    segments = draw(st.permutations(list(range(count))))  # the server finishes them in any order
    numbers = draw(st.lists(st.integers(0, 99), min_size=count, max_size=count, unique=True))
    shell: list[str] = ["<h1>Title</h1>"]
    assembled: list[str] = ["<h1>Title</h1>"]
    for position, paragraphs in enumerate(contents):
        shell.append(f"<section><template id='B:{position}'></template><p>after {position}</p></section>")
        inner = "".join(f"<p>{html_lib.escape(p)}</p>" for p in paragraphs)
        assembled.append(f"<section><div>{inner}</div><p>after {position}</p></section>")
    tail: list[str] = []
    for position in segments:
        inner = "".join(f"<p>{html_lib.escape(p)}</p>" for p in contents[position])
        tail.append(f"<div hidden id='S:{numbers[position]}'>{inner}</div>")
        tail.append(f'<script>$RC("B:{position}","S:{numbers[position]}")</script>')
    return "".join(shell) + "".join(tail), "".join(assembled)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streamed_pages())
async def test_a_streamed_page_reads_as_its_assembled_twin(pair: tuple[str, str]) -> None:
    page, assembled = pair
    for fmt in ("text", "markdown"):
        assert (await read(page, format=fmt))[0] == (await read(assembled, format=fmt))[0]


def test_moved_blocks_stay_inside_the_elements_around_their_placeholder() -> None:
    reduction = reduce_all(streamed("S:0", '$RC("B:0","S:0")'))
    texts = [block.text for block in reduction.blocks]
    article = next(c for c in reduction.containers if c.name == "article")
    assert texts[article.start : article.end] == ["Budget passes", PROSE, MORE, "Filed by the city desk."]
    for container in reduction.containers:
        assert 0 <= container.start < container.end <= len(texts)


# Declarative shadow DOM


async def test_a_declarative_shadow_root_is_read_as_its_hosts_content() -> None:
    for mode in ("open", "closed"):
        page = (
            f"<article-card><template shadowrootmode='{mode}'><h2>Inside</h2><p>{PROSE}</p>"
            "<slot></slot></template><p>Light text.</p></article-card>"
        )
        text, _, hidden = await read(page)
        assert text.split("\n") == ["Inside", PROSE, "Light text."], mode
        assert hidden == 0


async def test_the_older_shadowroot_attribute_is_read_too() -> None:
    text, _, _ = await read(f"<x-a><template shadowroot='open'><p>{PROSE}</p></template></x-a>")
    assert text == PROSE


async def test_an_inert_template_is_still_dropped() -> None:
    for attrs in ("", " id='row'", " shadowrootmode='bogus'"):
        text, _, hidden = await read(f"<p>Shown.</p><template{attrs}><p>{PROSE}</p></template>")
        assert (text, hidden) == ("Shown.", 0), attrs


async def test_hidden_text_inside_a_shadow_root_is_still_hidden() -> None:
    page = f"<x-a><template shadowrootmode='open'><p hidden>Secret words</p><p>{PROSE}</p></template></x-a>"
    text, _, hidden = await read(page)
    assert text == PROSE and hidden == len("Secret words")
