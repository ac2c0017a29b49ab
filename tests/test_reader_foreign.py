"""svg and math as a reader sees them: a drawing is not text, a formula is, and neither swallows
the page. Where foreign content ends is checked against html5lib's own tree builder."""

from __future__ import annotations

import re
from unittest import mock
from xml.etree.ElementTree import Element

import html5lib
import pytest
from html5lib import html5parser
from html5lib.constants import namespaces, specialElements
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.reader.html.reduce import reduce_all
from jobs.reader.main_content import join_blocks

SVG = "http://www.w3.org/2000/svg"
MATHML = "http://www.w3.org/1998/Math/MathML"
WORD = re.compile(r"w\d+")


def text_of(html: str) -> str:
    return join_blocks(reduce_all(html).blocks)


@pytest.mark.parametrize(
    "drawing",
    [
        "<svg><foreignObject>label</svg>",
        "<svg><foreignObject><p>label</p></foreignObject></svg>",
        "<svg><title>label</svg>",
        "<svg><desc>label</svg>",
        "<svg><g><foreignObject>label</g></svg>",
        "<svg><g><title>label</svg>",
        "<svg><g><desc>label</desc></svg>",
        "<svg><text>label</text>",
    ],
)
def test_an_unclosed_part_of_a_drawing_does_not_swallow_the_page(drawing: str) -> None:
    assert text_of(f"<p>Before.</p>{drawing}<p>After.</p>") == "Before.\nAfter."


def test_a_self_closed_svg_or_math_ends_where_it_starts() -> None:
    assert text_of("<p>one <svg/>two <math/>three</p>") == "one two three"


def test_a_formula_reads_as_linear_text() -> None:
    html = (
        "<p>Since <math><msup><mi>e</mi><mrow><mi>i</mi><mi>π</mi></mrow></msup><mo>+</mo>"
        "<mn>1</mn><mo>=</mo><mn>0</mn></math>, and <math><mfrac><mi>a</mi><mi>b</mi></mfrac>"
        "<mo>=</mo><msqrt><mi>c</mi></msqrt><mo>-</mo><msub><mi>x</mi><mn>1</mn></msub></math>.</p>"
    )
    assert text_of(html) == "Since e^iπ+1=0, and a/b=√c-x_1."


def test_a_formula_shows_its_rendering_not_its_annotations() -> None:
    html = (
        "<p><math><semantics><mrow><mi>x</mi><mo>+</mo><mn>1</mn></mrow>"
        "<annotation encoding='application/x-tex'>x + 1</annotation>"
        "<annotation-xml encoding='MathML-Content'><apply><plus/><ci>y</ci></apply></annotation-xml>"
        "</semantics></math></p>"
    )
    assert text_of(html) == "x+1"


def test_a_phantom_in_a_formula_takes_space_but_shows_nothing() -> None:
    reduction = reduce_all("<p><math><mi>a</mi><mphantom><mi>zz</mi></mphantom><mi>b</mi></math></p>")
    assert (join_blocks(reduction.blocks), reduction.hidden_removed) == ("ab", 2)


def test_cdata_in_a_formula_is_its_text_and_in_a_drawing_stays_in_the_drawing() -> None:
    assert text_of(
        "<p><math><mi><![CDATA[a<b]]></mi></math> and <svg><![CDATA[ > <p>x</p> ]]></svg>c</p>"
    ) == ("a<b and c")


def test_cdata_outside_svg_and_math_is_a_bogus_comment() -> None:
    assert text_of("<p>a<![CDATA[hidden]]>b</p>") == "ab"


# The differential test: on small generated svg/math inputs, the reducer and html5lib's tree
# builder agree on which words are in the document (and in which order).

TAGS = [
    "<svg>",
    "</svg>",
    "<svg/>",
    "<math>",
    "</math>",
    "<math/>",
    "<foreignObject>",
    "</foreignObject>",
    "<desc>",
    "</desc>",
    "<title>",
    "</title>",
    "<g>",
    "</g>",
    "<text>",
    "</text>",
    "<mi>",
    "</mi>",
    "<mi/>",
    "<mo>",
    "</mo>",
    "<mtext>",
    "</mtext>",
    "<mrow>",
    "</mrow>",
    "<mfrac>",
    "</mfrac>",
    "<msup>",
    "</msup>",
    "<semantics>",
    "</semantics>",
    "<annotation>",
    "</annotation>",
    "<annotation-xml>",
    '<annotation-xml encoding="text/html">',
    "</annotation-xml>",
    "<mphantom>",
    "</mphantom>",
    "<mglyph>",
    "<p>",
    "</p>",
    "<div>",
    "</div>",
    "<b>",
    "</b>",
    "<span>",
    "</span>",
    "<br>",
    '<font color="red">',
    "<font>",
    "</font>",
    "<clipPath>",
    "</clippath>",
    "<maction>",
    "</maction>",
    "<msqrt>",
    "</msqrt>",
    "<mn>",
    "</mn>",
    "<h1>",
    "</h1>",
    "<li>",
    "<img>",
    "</br>",
    "<script>",
    "</script>",
    "<style>",
    "</style>",
    "<textarea>",
    "</textarea>",
    "<a href=x>",
    "</a>",
    "<ul>",
    "</li>",
    "<pre>",
    "<![CDATA[ {} ]]>",
]
FRAGMENTS = st.lists(st.one_of(st.sampled_from(TAGS), st.just(" {} ")), min_size=1, max_size=30)
# html5lib 1.1 predates the standard's current list of special elements, to which MathML's token
# elements and svg's desc and title now belong; browsers follow the standard, and so does the
# reducer: a stray </span> must not lift the text of an svg <desc> out of the drawing.
SPECIAL_NOW = specialElements | {
    (namespaces[space], name)
    for space, names in (
        ("mathml", ("mi", "mo", "mn", "ms", "mtext", "annotation-xml")),
        ("svg", ("desc", "title")),
    )
    for name in names
}
NOT_SHOWN_MATH = frozenset({"annotation", "annotation-xml", "mphantom"})
NOT_SHOWN_HTML = frozenset({"title", "head", "script", "style"})


def markup_of(fragments: list[str]) -> str:
    parts = []
    for index, fragment in enumerate(fragments):
        parts.append(fragment.replace("{}", f"w{index}"))
    return "".join(parts)


def tree_words(markup: str) -> list[str]:
    """The words html5lib's tree builder puts in the document where a reader would see them."""
    with mock.patch.object(html5parser, "specialElements", SPECIAL_NOW):
        root = html5lib.parse(markup, treebuilder="etree", namespaceHTMLElements=False)
    words: list[str] = []

    def walk(element: Element, shown: bool) -> None:
        tag = element.tag if isinstance(element.tag, str) else ""
        namespace, _, name = tag[1:].partition("}") if tag.startswith("{") else ("", "", tag)
        not_shown = NOT_SHOWN_MATH if namespace == MATHML else NOT_SHOWN_HTML if not namespace else None
        if not_shown is None or name in not_shown:
            shown = False
        if shown and element.text and isinstance(element.tag, str):
            words.extend(WORD.findall(element.text))
        first_child = True
        for child in element:
            child_shown = shown
            if namespace == MATHML and name in ("semantics", "maction") and not first_child:
                child_shown = False
            walk(child, child_shown)
            first_child = False
            if shown and child.tail:
                words.extend(WORD.findall(child.tail))

    walk(root, True)
    return words


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FRAGMENTS)
def test_the_reducer_and_html5libs_tree_builder_agree_on_which_words_a_reader_sees(
    fragments: list[str],
) -> None:
    markup = markup_of(fragments)
    assert WORD.findall(text_of(markup)) == tree_words(markup), markup
