"""Pieces and find as pure functions: the join property, safe seams, and folding that maps back."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import example, given
from hypothesis import strategies as st

from jobs.reader import markdown_escape as escape
from jobs.reader.pieces import MAX_MATCHES, SNIPPET_CHARS, find, fold, needle_of, piece

# Text with the characters that make seams hard: combining marks, joiners, backslashes, astral
# characters, lone surrogates, every kind of whitespace.
SEAMY = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("ab \n\t\\*#`|[]()é\u0301\u0308\u200d\ufe0f\u00a0\u2028İß")),
        st.characters(codec="utf-8"),
        st.sampled_from(["\U0001f600", "\ud83d", "\ude00"]),
    ),
    max_size=400,
)


def pieces_of(whole: str, size: int, *, markdown: bool) -> list[str]:
    out, offset = [], 0
    while True:
        p = piece(whole, offset, size, markdown=markdown)
        assert p.offset == offset
        out.append(p.text)
        if p.next_offset is None:
            return out
        assert offset < p.next_offset <= offset + size
        offset = p.next_offset


@given(SEAMY, st.integers(1, 50), st.booleans())
def test_the_pieces_of_a_text_joined_in_order_are_the_text(whole: str, size: int, markdown: bool) -> None:
    assert "".join(pieces_of(whole, size, markdown=markdown)) == whole


CLUSTERS = st.lists(
    st.tuples(st.sampled_from("aeo"), st.text(alphabet="\u0301\u0308\u0327\u200d\ufe0f", max_size=5)),
    max_size=200,
)


@given(CLUSTERS, st.integers(8, 60))
def test_a_piece_never_ends_between_a_letter_and_its_marks_when_the_cluster_is_short(
    clusters: list[tuple[str, str]], size: int
) -> None:
    whole = "".join(letter + marks for letter, marks in clusters)
    offset = 0
    while (p := piece(whole, offset, size, markdown=False)).next_offset is not None:
        following = whole[p.next_offset]
        assert not unicodedata.combining(following) and following not in "\u200d\ufe0f", (whole, offset, p)
        offset = p.next_offset


@given(st.text(alphabet="a\\", min_size=1, max_size=200), st.integers(1, 30))
def test_a_markdown_piece_never_ends_in_the_middle_of_an_escape(whole: str, size: int) -> None:
    offset = 0
    while (p := piece(whole, offset, size, markdown=True)).next_offset is not None:
        trailing = len(p.text) - len(p.text.rstrip("\\"))
        if trailing < len(p.text):  # a piece of backslashes only has nowhere to back off to
            assert trailing % 2 == 0, (whole, offset, size, p)
        offset = p.next_offset


@given(SEAMY)
def test_folding_maps_every_folded_character_back_to_the_same_letter(text: str) -> None:
    folded = fold(text)
    for at, char in enumerate(folded.text):
        source = text[folded.source_offset(at)]
        if char == " ":
            assert source.isspace()
        else:
            assert char == source.lower() or char == source


@given(SEAMY)
def test_folding_collapses_whitespace_as_a_regular_expression_would(text: str) -> None:
    lowered = fold(text).lowered
    assert fold(text).text == re.sub(r"\s+", " ", lowered)


@given(st.integers(1, 3), st.sampled_from([" ", "\n", "a"]), st.sampled_from([" ", "\t", "b"]))
def test_folding_carries_a_whitespace_run_across_its_blocks(blocks: int, last: str, first: str) -> None:
    from jobs.reader.pieces import FOLD_BLOCK

    text = ("x" * (FOLD_BLOCK - 1) + last + first) * blocks
    assert fold(text).text == re.sub(r"\s+", " ", text.lower())


WORDS = st.lists(
    st.sampled_from(["going", "concern", "Doubt", "the", "a.b", "(x+)+", "É"]), min_size=1, max_size=4
)
GAPS = st.sampled_from([" ", "  ", "\n", "\t \n", "\u00a0"])


@given(st.lists(st.tuples(WORDS, GAPS), max_size=30), WORDS)
def test_find_matches_where_the_words_stand_whatever_their_case_and_spacing(
    document: list[tuple[list[str], str]], wanted: list[str]
) -> None:
    whole = "".join(gap.join(words) + gap for words, gap in document)
    needle = needle_of(" ".join(wanted))
    matches = find(whole, needle)
    assert len(matches) <= MAX_MATCHES
    for match in matches:
        assert fold(whole[match.offset :]).text.startswith(needle)
        assert len(match.snippet) <= SNIPPET_CHARS
    # And none is missed: as many as a plain search of the folded text finds, up to the bound.
    expected, at = 0, fold(whole).text.find(needle)
    while at >= 0 and expected < MAX_MATCHES:
        expected += 1
        at = fold(whole).text.find(needle, at + len(needle))
    assert len(matches) == expected


def test_a_snippet_holds_its_match_and_is_cut_at_word_boundaries() -> None:
    whole = (
        " ".join(f"word{n}" for n in range(500))
        + " going concern "
        + " ".join(f"tail{n}" for n in range(500))
    )
    [match] = find(whole, needle_of("going concern"))
    assert "going concern" in match.snippet
    words = match.snippet.split()
    assert all(w.startswith(("word", "tail", "going", "concern")) and w[-1].isalnum() for w in words)
    assert words[0] in whole.split() and words[-1] in whole.split()


# Prose: words, with sentence ends, commas and paragraph breaks between them (and no characters a
# seam would back off from, so only the boundary rule moves a piece's end).
PROSE = st.lists(
    st.tuples(
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz_*[]", min_size=1, max_size=25),
        st.sampled_from([" ", " ", " ", ", ", ". ", "! ", "? ", "\n", "\n\n", ".\n\n"]),
    ),
    max_size=120,
).map(lambda parts: "".join(word + gap for word, gap in parts))


def _in_last_tenth(offset: int, size: int) -> range:
    """The ends a piece ``[offset, offset + size)`` may take under the boundary rule."""
    end = offset + size
    return range(max(offset + 1, end - size // 10), end + 1)


@given(PROSE, st.integers(20, 400), st.booleans())
# A stop just before the last tenth whose space lies inside it: that sentence's end, not a word's.
@example("[ [, [[, [[[ [[[, [[[[, [[[[[, [[[[[[.\n\n[[[[[[[ [[[[[[[[[[, [[[[[[[[[[[[[[. [ [ ", 20, False)
def test_a_piece_ends_at_the_best_boundary_in_its_last_tenth_and_the_pieces_still_join(
    whole: str, size: int, markdown: bool
) -> None:
    assert "".join(pieces_of(whole, size, markdown=markdown)) == whole
    offset = 0
    while (p := piece(whole, offset, size, markdown=markdown)).next_offset is not None:
        cut, window = p.next_offset, _in_last_tenth(offset, size)
        paragraphs = [c for c in window if c - 2 >= offset and whole[c - 2 : c] == "\n\n"]
        sentences = [
            c for c in window if whole[c - 1].isspace() and whole[offset:c].rstrip()[-1:] in (".", "!", "?")
        ]
        words = [c for c in window if whole[c - 1].isspace() or whole[c].isspace()]
        if paragraphs:
            assert cut == max(paragraphs), (whole, offset, size, cut)
        elif sentences:
            assert cut in sentences, (whole, offset, size, cut)
        elif words:
            assert cut in words, (whole, offset, size, cut)
        else:
            assert cut == offset + size  # one word fills the whole tenth: cut at the size
        offset = cut


def test_a_piece_of_one_long_word_is_cut_at_its_size() -> None:
    assert piece("x" * 100, 0, 40, markdown=False).next_offset == 40
    # and a word boundary just past the tenth is not reached for
    assert piece("x" * 50 + " " + "y" * 49, 0, 40, markdown=False).next_offset == 40


# Strings a reader sees with Markdown's special characters in them, which the Markdown escapes.
SPECIAL = st.text(alphabet="ab_*[]\\|`<>~&#-+=.!()%1 ", min_size=1, max_size=30).filter(lambda s: s.strip())
NAMED = ["snake_case_name", "a*b*c", "[1]", "back\\slash", "100% | 50%"]


def _unescape(markdown: str) -> str:
    """What a CommonMark renderer shows of escaped prose: a backslash before ASCII punctuation goes."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


@given(st.lists(SPECIAL, min_size=1, max_size=6), st.integers(0, 5))
def test_find_in_markdown_finds_what_a_reader_sees_and_maps_it_into_the_markdown(
    lines: list[str], pick: int
) -> None:
    wanted = lines[pick % len(lines)]
    markdown = "\n\n".join(escape.line(" ".join(line.split())) for line in lines)
    needle = needle_of(wanted)
    matches = find(markdown, needle, markdown=True)
    assert matches, (markdown, wanted)
    seen = fold(_unescape(markdown)).text
    assert len(matches) == min(MAX_MATCHES, _count(seen, needle))
    for match in matches:
        # The match starts at a character of the Markdown (or the escape before it) and what a
        # reader sees from there starts with the needle.
        assert fold(_unescape(markdown[match.offset :])).text.startswith(needle), (markdown, match)


def _count(text: str, needle: str) -> int:
    count, at = 0, text.find(needle)
    while at >= 0:
        count += 1
        at = text.find(needle, at + len(needle))
    return count


def test_the_named_strings_are_found_in_markdown_and_in_text_alike() -> None:
    prose = "Use " + " then ".join(NAMED) + " and stop."
    markdown = escape.line(prose)
    assert [name for name in NAMED if name in markdown] == []  # each is escaped in the Markdown
    for name in NAMED:
        [in_markdown] = find(markdown, needle_of(name), markdown=True)
        [in_text] = find(prose, needle_of(name))
        assert _unescape(markdown[in_markdown.offset :]).startswith(name)
        assert prose[in_text.offset :].startswith(name)


def test_find_in_a_markdown_code_block_searches_its_text_as_written() -> None:
    markdown = "Before\n\n```\nC:\\*.txt and a\\_b\n```\n\nAfter a\\_b"
    [code] = find(markdown, needle_of("a\\_b"), markdown=True)
    [prose] = find(markdown, needle_of("a_b"), markdown=True)
    assert markdown[code.offset :].startswith("a\\_b\n```")
    assert markdown[prose.offset :] == "a\\_b"


# Find's folding with its answers written out, and a family whose oracle is the test's own build:
# the document is made of known lower-case words, each spelled in a case the example picks, with
# gaps of any whitespace, so where each phrase stands is known without folding anything.


def test_find_ignores_case_and_spacing_in_the_document_and_in_the_needle() -> None:
    whole = "Going CONCERN and going\nconcern; GOING   Concern."
    assert needle_of("  Going\tCONCERN ") == "going concern"
    assert [m.offset for m in find(whole, needle_of("GOING concern"))] == [0, 18, 33]
    assert [m.offset for m in find("ÉCOLE école École", needle_of("école"))] == [0, 6, 12]
    assert [m.offset for m in find("the DOUBT, the Doubt", needle_of("doubt"))] == [4, 15]
    assert find("going concerns", needle_of("going  concerned")) == []


UPPER = {"a": "A", "b": "B", "é": "É"}


@given(
    st.lists(
        st.tuples(
            st.text(alphabet="abé", min_size=1, max_size=3),
            st.lists(st.booleans(), min_size=3, max_size=3),
            st.sampled_from([" ", "  ", "\n", "\t \n", "\u00a0"]),
        ),
        max_size=25,
    ),
    st.lists(st.text(alphabet="abé", min_size=1, max_size=3), min_size=1, max_size=2),
)
def test_find_finds_each_phrase_where_the_document_was_built_to_hold_it(
    document: list[tuple[str, list[bool], str]], wanted: list[str]
) -> None:
    whole, plain, where = "", "", []  # plain: the words lower-case, one space apart; where: back to whole
    for word, upper, gap in document:
        for ch, up in zip(word, upper, strict=False):
            where.append(len(whole))
            plain += ch
            whole += UPPER[ch] if up else ch
        where.append(len(whole))
        plain += " "
        whole += gap
    phrase = " ".join(wanted)
    spelled = "\t".join(w.translate(str.maketrans(UPPER)) for w in wanted)  # the needle upper-cased
    expected, at = [], plain.find(phrase)
    while at >= 0 and len(expected) < MAX_MATCHES:
        expected.append(where[at])
        at = plain.find(phrase, at + len(phrase))
    assert [m.offset for m in find(whole, needle_of(spelled))] == expected
