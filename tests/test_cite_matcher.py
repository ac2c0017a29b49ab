"""The citation matcher, by families: a true quote, changed by each normalization the contract lists,
is found where it was put (the oracle is the generated document's own insertion offset, never the
matcher); a quote whose words or numbers differ from the page is never found."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jobs.cite.fold import Fold, fold
from jobs.cite.matcher import MAX_GAP, Document, Status

# Three vocabularies that share no word, even case-folded: the filler around a quote, the quote,
# and fabricated sentences. A quote's words are nowhere else on the page, so where it was put is
# the only place it can be found, and a changed word can be found nowhere.
FILLER_WORD = st.text("abcdef", min_size=1, max_size=7)
FILLER_NUMBER = st.text("01", min_size=1, max_size=4)
QUOTE_WORD = st.text("ghijklm", min_size=2, max_size=8)
QUOTE_NUMBER = st.text("23456789", min_size=1, max_size=5)
FABRICATED_WORD = st.text("uvwxyz", min_size=1, max_size=8)
PUNCT = st.sampled_from([",", ";", ":", ".", "!", "?"])

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def filler(draw: st.DrawFn, min_words: int = 0, max_words: int = 40) -> str:
    words = draw(st.lists(st.one_of(FILLER_WORD, FILLER_NUMBER), min_size=min_words, max_size=max_words))
    out = []
    for word in words:
        out.append(word + (draw(PUNCT) if draw(st.integers(0, 5)) == 0 else ""))
    return " ".join(out)


@st.composite
def quote_words(draw: st.DrawFn, min_size: int = 3, max_size: int = 12) -> list[str]:
    words = draw(st.lists(st.one_of(QUOTE_WORD, QUOTE_NUMBER), min_size=min_size, max_size=max_size))
    # Capitals the case fold must see past, and a number the digit family can change.
    words[0] = words[0].capitalize()
    if not any(w.isdigit() for w in words):
        words.append(draw(QUOTE_NUMBER))
    return words


@st.composite
def placed(draw: st.DrawFn, words: list[str] | None = None) -> tuple[str, int, str]:
    """(document, offset of the quote in it, the quote as the page writes it)."""
    words = words if words is not None else draw(quote_words())
    quote = " ".join(words)
    before, after = draw(filler()), draw(filler())
    prefix = before + (draw(st.sampled_from([" ", "\n", "\n\n", ". "])) if before else "")
    suffix = (draw(st.sampled_from([" ", ".", "\n", ", "])) + after) if after else ""
    return prefix + quote + suffix, len(prefix), quote


def found_at(document: str, quote: str) -> tuple[Status, int, int]:
    found = Document(document).match(quote)
    return found.status, found.start, found.end


# --- true quotes, each normalization -------------------------------------------------------------


@SETTINGS
@given(placed())
def test_an_exact_quote_is_verified_where_it_was_put(case: tuple[str, int, str]) -> None:
    document, at, quote = case
    assert found_at(document, quote) == (Status.VERIFIED, at, at + len(quote))


@SETTINGS
@given(
    placed(),
    st.lists(st.sampled_from([" ", "  ", "\n", "\t", "\u00a0", " \n ", "\r\n", "\u2003"]), min_size=30),
)
def test_whitespace_does_not_matter(case: tuple[str, int, str], spaces: list[str]) -> None:
    document, at, quote = case
    respaced = "".join(
        part + (spaces[n % len(spaces)] if n < len(quote.split(" ")) - 1 else "")
        for n, part in enumerate(quote.split(" "))
    )
    assert found_at(document, " " + respaced + "\n") == (Status.VERIFIED, at, at + len(quote))
    # ... nor on the page's side: the page's spaces changed, the quote as it was.
    paged = document[:at] + respaced + document[at + len(quote) :]
    assert found_at(paged, quote) == (Status.VERIFIED, at, at + len(respaced))


@SETTINGS
@given(placed(), st.sampled_from(["upper", "lower", "swapcase", "title"]))
def test_case_does_not_matter(case: tuple[str, int, str], how: str) -> None:
    document, at, quote = case
    changed = getattr(quote, how)()
    assume(changed != quote)
    assert found_at(document, changed) == (Status.APPROXIMATE, at, at + len(quote))


QUOTE_PAIRS = [
    ("\u201c", "\u201d"),
    ("\u00ab", "\u00bb"),
    ("\u201e", "\u201c"),
    ("'", "'"),
    ("\u2018", "\u2019"),
]


@SETTINGS
@given(quote_words(), st.sampled_from(QUOTE_PAIRS), st.sampled_from(QUOTE_PAIRS), st.data())
def test_quotation_marks_do_not_matter(
    words: list[str], page_marks: tuple[str, str], quote_marks: tuple[str, str], data: st.DataObject
) -> None:
    inner = len(words) // 2
    page_words = [*words[:inner], page_marks[0] + words[inner] + page_marks[1], *words[inner + 1 :]]
    document, at, on_page = data.draw(placed(page_words))
    quoted = " ".join([*words[:inner], quote_marks[0] + words[inner] + quote_marks[1], *words[inner + 1 :]])
    status = Status.VERIFIED if quote_marks == page_marks else Status.APPROXIMATE
    assert found_at(document, quoted) == (status, at, at + len(on_page))
    # A quote wrapped whole in marks the page does not have is the same quote.
    assert found_at(document, "\u201c" + on_page + "\u201d")[1:] == (at, at + len(on_page))


@SETTINGS
@given(quote_words(min_size=2), st.sampled_from(["\u2019", "'", "\u02bc", "`"]), st.data())
def test_apostrophes_do_not_matter(words: list[str], mark: str, data: st.DataObject) -> None:
    page_words = [words[0] + "\u2019s", *words[1:]]
    document, at, on_page = data.draw(placed(page_words))
    quoted = " ".join([words[0] + mark + "s", *words[1:]])
    status, start, end = found_at(document, quoted)
    if mark == "\u02bc":
        # A modifier letter apostrophe is a letter, not a mark: that is another word.
        assert status is Status.NOT_FOUND
        return
    assert (start, end) == (at, at + len(on_page))
    assert status is (Status.VERIFIED if mark == "\u2019" else Status.APPROXIMATE)


DASHES = ["-", "\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2212"]


@SETTINGS
@given(quote_words(min_size=3), st.sampled_from(DASHES), st.sampled_from(DASHES), st.booleans(), st.data())
def test_dashes_do_not_matter(
    words: list[str], page_dash: str, quote_dash: str, spaced: bool, data: st.DataObject
) -> None:
    joint = f" {page_dash} " if spaced else page_dash
    quoted_joint = f" {quote_dash} " if spaced else quote_dash
    page_words = [words[0] + joint + words[1], *words[2:]]
    document, at, on_page = data.draw(placed(page_words))
    quoted = " ".join([words[0] + quoted_joint + words[1], *words[2:]])
    status = Status.VERIFIED if page_dash == quote_dash else Status.APPROXIMATE
    assert found_at(document, quoted) == (status, at, at + len(on_page))


@SETTINGS
@given(placed(), st.data(), st.sampled_from(["\u00ad", "\ufffe"]))
def test_soft_hyphens_do_not_matter(case: tuple[str, int, str], data: st.DataObject, shy: str) -> None:
    """A soft hyphen, or the mark PDFium writes where it joined a word hyphenated at a line's end."""
    document, at, quote = case
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(quote) - 1), min_size=1, max_size=5))))
    assume(all(quote[c - 1].isalpha() and quote[c].isalpha() for c in cuts))
    soft = "".join(
        quote[a:b] + (shy if b < len(quote) else "")
        for a, b in zip([0, *cuts], [*cuts, len(quote)], strict=True)
    )
    paged = document[:at] + soft + document[at + len(quote) :]
    assert found_at(paged, quote) == (Status.VERIFIED, at, at + len(soft))
    # Broken at a soft hyphen across lines, as a PDF may be: the word is one word again.
    broken = soft.replace(shy, shy + "\n", 1)
    paged = document[:at] + broken + document[at + len(quote) :]
    assert found_at(paged, quote) == (Status.APPROXIMATE, at, at + len(broken))


@SETTINGS
@given(placed(), st.data(), st.sampled_from(["-\n", "-\r\n", "- \n", "\u2010\n"]))
def test_a_word_broken_across_lines_is_one_word(
    case: tuple[str, int, str], data: st.DataObject, brk: str
) -> None:
    document, at, quote = case
    long_words = [n for n, w in enumerate(quote.split(" ")) if len(w) >= 4 and w.isalpha()]
    assume(long_words)
    index = data.draw(st.sampled_from(long_words))
    word = quote.split(" ")[index]
    cut = data.draw(st.integers(2, len(word) - 2))
    words = quote.split(" ")
    words[index] = word[:cut] + brk + word[cut:]
    broken = " ".join(words)
    paged = document[:at] + broken + document[at + len(quote) :]
    assert found_at(paged, quote) == (Status.APPROXIMATE, at, at + len(broken))


@SETTINGS
@given(quote_words(), st.data())
def test_compatibility_forms_do_not_matter(words: list[str], data: st.DataObject) -> None:
    """NFKC: full-width letters and digits, ligatures; NFC: a letter and its combining mark."""
    wide = " ".join("".join(chr(ord(c) + 0xFEE0) for c in w) for w in words)
    document, at, on_page = data.draw(placed(wide.split(" ")))
    assert found_at(document, " ".join(words)) == (Status.APPROXIMATE, at, at + len(on_page))
    document, at, on_page = data.draw(placed(["caf\u00e9", *words]))
    decomposed = unicodedata.normalize("NFD", on_page)
    assert found_at(document, decomposed) == (Status.VERIFIED, at, at + len(on_page))
    document, at, on_page = data.draw(placed(["\ufb01ne", *words]))
    assert found_at(document, "fine " + " ".join(words)) == (Status.APPROXIMATE, at, at + len(on_page))


@SETTINGS
@given(quote_words(min_size=2, max_size=5), quote_words(min_size=2, max_size=5), filler(0, 200), st.data())
def test_an_ellipsis_joins_parts_found_in_order(
    first: list[str], last: list[str], middle: str, data: st.DataObject
) -> None:
    head, tail = " ".join(first), " ".join(last)
    assume(tail.lower() not in head.lower() and head.lower() not in tail.lower())
    document, at, _ = data.draw(placed([*first, *middle.split(), *last]))
    start_tail = document.index(tail, at + len(head))
    mark = data.draw(st.sampled_from(["...", "\u2026", " [...] ", " \u2026 ", ". . ."]))
    found = Document(document).match(head + mark + tail)
    assert (found.status, found.start, found.end) == (Status.VERIFIED, at, start_tail + len(tail))
    assert found.parts == ((at, at + len(head)), (start_tail, start_tail + len(tail)))
    # Out of order, the parts are not the quote.
    assert Document(document).match(tail + " ... " + head).status is Status.NOT_FOUND


def test_an_ellipsis_reaches_no_further_than_two_thousand_characters() -> None:
    near = "Ghi jkl " + "ab " * ((MAX_GAP - 2) // 3) + "mlk jih."
    far = "Ghi jkl " + "ab " * ((MAX_GAP + 3) // 3) + "mlk jih."
    assert Document(near).match("Ghi jkl ... mlk jih").status is Status.VERIFIED
    assert Document(far).match("Ghi jkl ... mlk jih").status is Status.NOT_FOUND
    # The first part's second occurrence is near enough: that one is taken.
    both = far + " Ghi jkl ab ab mlk jih"
    found = Document(both).match("Ghi jkl ... mlk jih")
    assert (found.status, found.start) == (Status.VERIFIED, len(far) + 1)


# --- quotes that must never match -----------------------------------------------------------------


@st.composite
def altered(draw: st.DrawFn) -> tuple[str, str]:
    """(document, a quote of it altered so that its words or numbers differ)."""
    words = draw(quote_words(min_size=4))
    words.insert(draw(st.integers(1, len(words) - 1)), "not")
    document, _, _ = draw(placed(words))
    how = draw(st.sampled_from(["word", "digit", "not", "fabricated", "reordered", "inserted"]))
    changed = list(words)
    if how == "word":
        candidates = [i for i, w in enumerate(words) if not w.isdigit() and w != "not"]
        assume(candidates)
        n = draw(st.sampled_from(candidates))
        replacement = draw(QUOTE_WORD)
        assume(replacement.casefold() != words[n].casefold())
        changed[n] = replacement
    elif how == "digit":
        n = draw(st.sampled_from([i for i, w in enumerate(words) if w.isdigit()]))
        k = draw(st.integers(0, len(words[n]) - 1))
        digit = draw(st.sampled_from([d for d in "0123456789" if d != words[n][k]]))
        changed[n] = words[n][:k] + digit + words[n][k + 1 :]
    elif how == "not":
        changed.remove("not")
    elif how == "fabricated":
        changed = draw(st.lists(FABRICATED_WORD, min_size=3, max_size=10))
    elif how == "reordered":
        changed = draw(st.permutations(words))
        assume(changed != words)
    else:
        changed.insert(draw(st.integers(1, len(words) - 1)), draw(QUOTE_WORD))
    quote = " ".join(changed)
    # Kept to what the test means: never a piece of the true quote (a shorter true quote).
    assume(not _contiguous(_tokens(quote), _tokens(" ".join(words))))
    return document, quote


def _tokens(text: str) -> list[str]:
    """The oracle's own reading: lowercase words and numbers, punctuation ignored."""
    return ["".join(ch for ch in word if ch.isalnum()).casefold() for word in text.split()]


def _contiguous(needle: list[str], haystack: list[str]) -> bool:
    return any(haystack[i : i + len(needle)] == needle for i in range(len(haystack) - len(needle) + 1))


@SETTINGS
@given(altered(), st.sampled_from(["as is", "upper", "spaced", "curly", "elided"]))
def test_a_quote_whose_words_or_numbers_differ_is_never_found(case: tuple[str, str], dress: str) -> None:
    document, quote = case
    dressed = {
        "as is": quote,
        "upper": quote.upper(),
        "spaced": quote.replace(" ", "\n  "),
        "curly": "\u201c" + quote + "\u201d",
        "elided": "... " + quote + " \u2026",
    }[dress]
    assert Document(document).match(dressed).status is Status.NOT_FOUND


@pytest.mark.parametrize(
    ("page", "quote"),
    [
        ("revenue rose 110 percent in 2023", "10 percent in 2023"),
        ("revenue rose 110 percent in 2023", "rose 110 percent in 202"),
        ("revenue rose 1.5 million", "rose 15 million"),
        ("revenue rose 1,500 units", "rose 1.500 units"),
        ("the claim is not true", "the claim is true"),
        ("the claim isn't true", "the claim is true"),
        ("the plant was closed", "the plant was unclosed"),
        ("the plant was unclosed", "the plant was closed"),
        ("the foo bar", "the foobar"),
        ("ten-year bond", "tenyear bond rate"),
        ("a 10-20 range", "a 1020 range"),
    ],
)
def test_a_changed_word_or_number_is_never_found(page: str, quote: str) -> None:
    assert Document(page).match(quote).status is Status.NOT_FOUND


def test_the_folds_keep_every_letter_and_digit() -> None:
    """What the folds may drop is spacing, marks of punctuation between letters and invisible
    characters; the letters and digits of the text stay, in order."""
    text = "Ａｂ ﬁ 1–2 don’t infor-\nmation x\u00ady “q” ß"
    for how in Fold:
        kept = [ch for ch in fold(text, how).text if ch.isalnum()]
        expected = [ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum()]
        if how is Fold.STRICT:
            expected = [ch for ch in unicodedata.normalize("NFC", text) if ch.isalnum()]
        assert kept == expected
