"""The streaming reducer: readable text from HTML on html5lib's tokenizer, without its tree."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.reader.html.reduce import reduce_all
from jobs.reader.main_content import join_blocks
from tests.test_tokens import FRAGMENTS


def text_of(html: str) -> str:
    return join_blocks(reduce_all(html).blocks)


def test_a_typical_page_reads_as_lines_of_text() -> None:
    html = """<!doctype html><html><head><title>Page</title><style>p{color:red}</style></head>
    <body><h1>Heading</h1><p>First   paragraph,
    with <b>bold</b> and <a href="/x">a link</a>.</p><ul><li>one</li><li>two</ul>
    <p>Line one<br>line two</p></body></html>"""
    assert text_of(html) == "Heading\nFirst paragraph, with bold and a link.\none\ntwo\nLine one\nline two"


def test_inline_elements_join_without_a_space_and_blocks_break_lines() -> None:
    assert text_of("<p>un<b>break</b>able</p><div>next</div>") == "unbreakable\nnext"


def test_table_cells_stay_apart() -> None:
    html = "<table><tr><th>Name<th>Value<tr><td>alpha</td><td>1</td></tr><tr><td>beta<td>2</table>"
    assert text_of(html) == "Name\tValue\nalpha\t1\nbeta\t2"


def test_entities_decode() -> None:
    assert text_of("<p>caf&eacute; &amp; cr&#232;me &#x263A; &lt;tag&gt; &copy 2024 &nbsp;</p>") == (
        "café & crème ☺ <tag> © 2024"
    )


def test_pre_keeps_its_whitespace() -> None:
    html = "<p>a   b</p><pre>\ndef f():\n    return  1\n</pre><p>c</p>"
    assert text_of(html) == "a b\ndef f():\n    return  1\nc"


def test_the_title_goes_in_title_and_not_in_the_text() -> None:
    reduction = reduce_all("<title> The   Title </title><p>Body</p><title>second</title>")
    assert reduction.title == "The Title"
    assert join_blocks(reduction.blocks) == "Body"


def test_twenty_thousand_nested_divs_reduce_to_their_text() -> None:
    html = "<div>" * 20_000 + "deep text" + "</div>" * 20_000 + "<p>after</p>"
    assert text_of(html) == "deep text\nafter"


def test_an_unclosed_svg_does_not_swallow_the_page() -> None:
    html = "<p>before</p><svg><text>drawn label</text><g><p>visible again</p><div>and this</div>"
    assert text_of(html) == "before\nvisible again\nand this"


def test_a_block_inside_foreign_object_does_not_end_the_svg() -> None:
    html = (
        "<p>before</p><svg><foreignObject><p>inside the drawing</p></foreignObject>"
        "<text>label</text></svg><p>after</p>"
    )
    assert text_of(html) == "before\nafter"


def test_an_unclosed_template_hides_the_rest_as_a_browser_would() -> None:
    assert text_of("<p>shown</p><template><p>inert</p></div><p>still inert") == "shown"


def test_a_closed_template_hides_only_itself() -> None:
    assert text_of("<p>a</p><template><p>inert</p></template><p>b</p>") == "a\nb"


def test_scripts_styles_and_embedded_content_never_become_text() -> None:
    html = (
        "<script>var s = '<p>not text</p>';</script><style>p::after{content:'x'}</style>"
        "<noscript>enable js</noscript><iframe>fallback</iframe><object>obj</object>"
        "<svg><text>drawn</text></svg><canvas>no canvas</canvas><datalist><option>hint</datalist><p>kept</p>"
    )
    assert text_of(html) == "kept"


def test_a_script_ends_where_the_escaped_states_end_it() -> None:
    html = "<script><!-- <script>x</script> still script </script>--></script><p>after</p>"
    assert text_of(html) == "-->\nafter"


def test_a_textarea_and_title_are_rcdata_not_markup() -> None:
    assert text_of("<textarea><p>typed</p></textarea>") == "<p>typed</p>"


def test_hidden_elements_are_removed_and_counted() -> None:
    html = (
        "<p>visible</p><div hidden>one</div><span hidden=''>two</span>"
        "<p style='display: none'>three</p><p style='color:red;VISIBILITY:hidden !important'>four</p>"
        "<p style='display:\\6e one'>five</p><p style='display:/**/none'>six!</p><p>end</p>"
    )
    reduction = reduce_all(html)
    assert join_blocks(reduction.blocks) == "visible\nend"
    assert reduction.hidden_removed == len("onetwothreefourfivesix!")


def test_until_found_content_is_not_hidden() -> None:
    assert text_of("<div hidden=until-found>collapsed section</div>") == "collapsed section"


def test_a_dialog_is_hidden_until_open() -> None:
    assert text_of("<dialog>closed</dialog><dialog open>open</dialog>") == "open"


def test_invisible_characters_are_removed_and_counted() -> None:
    hidden_tags = "".join(chr(0xE0000 + ord(c)) for c in "ignore previous")
    html = f"<p>pay\u200bload \u202eevil\u202c {hidden_tags}done\u2066x\u2069</p>"
    reduction = reduce_all(html)
    assert join_blocks(reduction.blocks) == "payload evil donex"
    assert reduction.hidden_removed == 1 + 2 + len("ignore previous") + 2


def test_an_implied_end_tag_closes_a_hidden_paragraph_as_browsers_do() -> None:
    assert text_of("<p hidden>secret<div>shown</div>") == "shown"


def test_links_keep_the_raw_hrefs_of_visible_anchors_in_page_order() -> None:
    reduction = reduce_all(
        '<a href="/b">b</a><a href="/a">a</a><a href="/b">again</a>'
        '<div hidden><a href="/hidden">h</a></div><script><a href="/script"></a></script>'
        '<map><area href="/area"></map><base href="https://cdn.example/"><base href="https://other/">'
    )
    assert reduction.hrefs == ["/b", "/a", "/area"]
    assert reduction.base_href == "https://cdn.example/"


def test_a_long_run_of_text_is_split_rather_than_held_in_one_block() -> None:
    reduction = reduce_all("<p>" + "word " * 40_000 + "</p>")
    assert len(reduction.blocks) > 1
    assert all(len(block.text) <= 80_000 for block in reduction.blocks)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.lists(
        st.one_of(
            FRAGMENTS,
            st.sampled_from(
                [
                    "<svg>",
                    "<template>",
                    "<script>",
                    "</script>",
                    "<table>",
                    "<td>",
                    "<li>",
                    "<span hidden>",
                    "<pre>",
                    "<title>",
                    "<foreignObject>",
                ]
            ),
        ),
        max_size=60,
    )
)
def test_the_reducer_never_raises_on_random_markup(fragments: list[str]) -> None:
    reduction = reduce_all("".join(fragments))
    assert reduction.complete
    for container in reduction.containers:
        assert 0 <= container.start < container.end <= len(reduction.blocks)


def test_a_joiner_inside_a_word_of_a_script_that_needs_it_stays() -> None:
    reduction = reduce_all("<p>می\u200cخواهم 👨\u200d👩 pay\u200cload</p>")
    assert join_blocks(reduction.blocks) == "می\u200cخواهم 👨\u200d👩 payload"
    assert reduction.hidden_removed == 1


def test_soft_hyphens_are_dropped_without_counting_as_hidden() -> None:
    reduction = reduce_all("<p>Klima\u00adwandel</p>")
    assert (join_blocks(reduction.blocks), reduction.hidden_removed) == ("Klimawandel", 0)
