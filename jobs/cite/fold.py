"""A text folded for matching, with a map from the folded text back to the original's offsets.

Both a document and a quote are folded by the same function, once, in one pass over their tokens
(word runs, whitespace runs, single other characters, each with its combining marks), so a quote
is then found by a plain substring search (``str.find``) and never by a pattern built from it.

Two folds, one per tier of a citation's status (docs/citations.md):

- ``STRICT`` (``verified``): canonical equivalence (NFC) and whitespace only. A whitespace run of
  any kind is one space; invisible characters (soft hyphens, PDFium's U+FFFE hyphenation mark,
  zero-width characters, other format and control characters) are dropped; where a word meets
  punctuation with no space between, the fold writes ``BOUND``, so a quote can be required to
  start and end at a word's edge.
- ``LOOSE`` (``approximate``): also NFKC, case (``casefold``), every quotation mark and apostrophe
  as ``"``, every dash as ``-``, a dash or soft hyphen between letters dropped (the word broken
  across lines is one word again), and whitespace between a word and punctuation ignored (every
  token is separated by one space).

Neither fold drops or changes a letter or a digit (beyond case and compatibility forms), so words
and numbers that differ stay different; a space between two words is never removed.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

# Where a word meets punctuation with no whitespace between (STRICT only): never in a folded text
# otherwise, since control characters are dropped.
BOUND = "\x01"
# A soft hyphen, and the noncharacter PDFium writes where a word was hyphenated at a line's end.
SOFT_HYPHENS = frozenset("\u00ad\ufffe")
DASHES = frozenset("-\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2e3a\u2e3b\ufe58\ufe63\uff0d")
QUOTES = frozenset(
    "\"'`\u00b4\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u2032\u2033\u2035\u2036"
    "\u00ab\u00bb\u2039\u203a\u300c\u300d\u301d\u301e\u301f\uff02\uff07"
)
_LOOSE_MARKS = str.maketrans({**dict.fromkeys(QUOTES, '"'), **dict.fromkeys(DASHES, "-")})
# Runs of ASCII words joined by single spaces (most of any text, folded a run at a time: their
# STRICT fold is themselves and their LOOSE fold their lower case, character for character), word
# runs, whitespace runs, one other character. A run never ends where a word goes on (a word
# character or anything not ASCII follows). Linear, and fixed: never built from a quote.
_TOKEN = re.compile(
    r"([A-Za-z0-9]+(?: [A-Za-z0-9]+)*(?![\w\x80-\U0010ffff]))|(\w+)|(\s+)|(.)",
    re.DOTALL,
)


class Fold(Enum):
    STRICT = "strict"
    LOOSE = "loose"


@dataclass(frozen=True)
class Folded:
    """The folded text, and per emitted token where its folded form starts and which original
    characters it came from (separators belong to no token: a match never starts or ends on one)."""

    text: str
    starts: list[int]  # where each token's folded form starts in ``text``
    # Per token: (folded start, original start, original end, folded length).
    tokens: list[tuple[int, int, int, int]]

    def original_start(self, at: int) -> int:
        start, source, end, length = self.tokens[bisect_right(self.starts, at) - 1]
        return source + (at - start) if length == end - source else source

    def original_end(self, stop: int) -> int:
        """The original offset just past the folded character ``stop - 1``."""
        start, source, end, length = self.tokens[bisect_right(self.starts, stop - 1) - 1]
        return source + (stop - start) if length == end - source else end


def _is_mark(ch: str) -> bool:
    return unicodedata.category(ch)[0] == "M"


def _invisible(ch: str) -> bool:
    if ch < "\x7f":
        return ch < " "  # ASCII: only control characters (whitespace is never "other")
    return ch in SOFT_HYPHENS or unicodedata.category(ch) in ("Cf", "Cc")


_KINDS = (None, "r", "w", "s", "p")


def _tokens(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, kind) with kind "r" (a run of ASCII words), "w", "s" or "p"; combining marks
    stay with what they mark, and a word a mark interrupted goes on."""
    held: tuple[int, int, str] | None = None
    for m in _TOKEN.finditer(text):
        kind = _KINDS[m.lastindex or 4] or "p"
        start, end = m.span()
        mark = kind == "p" and text[start] >= "\x80" and _is_mark(text[start])
        if held is not None and ((mark and held[2] in ("w", "p")) or (kind == "w" and held[2] == "w")):
            held = (held[0], end, held[2])
            continue
        if held is not None:
            yield held
        held = (start, end, kind)
    if held is not None:
        yield held


def _word_key(token: str, fold: Fold) -> str:
    if fold is Fold.STRICT:
        return token if token.isascii() else unicodedata.normalize("NFC", token)
    if token.isascii():
        return token.lower()
    return "".join(unicodedata.normalize("NFKC", token).casefold().translate(_LOOSE_MARKS).split())


def _other_key(token: str, fold: Fold) -> str:
    if fold is Fold.STRICT:
        return token if token.isascii() else unicodedata.normalize("NFC", token)
    if token[0] in QUOTES:
        return '"'
    if token[0] in DASHES:
        return "-"
    return "".join(unicodedata.normalize("NFKC", token).casefold().translate(_LOOSE_MARKS).split())


def fold(text: str, how: Fold) -> Folded:
    """``text`` folded as ``how`` says, in one pass (linear in its length)."""
    loose = how is Fold.LOOSE
    parts: list[str] = []
    tokens: list[tuple[int, int, int, int]] = []
    size = 0
    last: str | None = None  # "w" or "p": the kind of the last token written
    space = False  # whitespace since it
    newline = False  # a line break in that whitespace
    alpha_end = False  # the last word written ends in a letter
    hyphen: tuple[int, int, bool] | None = None  # LOOSE: a dash held after a word (start, end, shown)

    def flush_hyphen() -> None:
        nonlocal hyphen, last, size
        if hyphen is not None:
            start, end, shown = hyphen
            hyphen = None
            if shown:
                parts.append(" -")
                tokens.append((size + 1, start, end, 1))
                size += 2
                last = "p"

    for start, end, kind in _tokens(text):
        token = text[start:end]
        if kind == "s":
            if hyphen is not None and "\n" not in token and "\r" not in token:
                flush_hyphen()  # a dash then a space on the same line: a dash, not a break
            space = True
            newline = newline or "\n" in token or "\r" in token
            continue
        if kind == "p" and _invisible(token[0]):
            if loose and token[0] in SOFT_HYPHENS and last == "w" and not space and alpha_end:
                hyphen = hyphen or (start, end, False)
            continue
        held = loose and kind == "p" and token in DASHES and hyphen is None
        if held and last == "w" and not space and alpha_end:
            hyphen = (start, end, True)
            continue
        if kind == "r":
            kind, key = "w", token.lower() if loose else token
        else:
            key = _word_key(token, how) if kind == "w" else _other_key(token, how)
        if not key:
            continue
        if hyphen is not None and kind == "w" and key[0].isalpha() and (not space or newline):
            hyphen = None  # a word broken at a dash (or soft hyphen) goes on: one word again
            sep = ""
        else:
            flush_hyphen()
            sep = _separator(last, kind, space, loose)
        if sep:
            parts.append(sep)
            size += 1
        parts.append(key)
        tokens.append((size, start, end, len(key)))
        size += len(key)
        last, space, newline = kind, False, False
        alpha_end = kind == "w" and key[-1].isalpha()
    flush_hyphen()
    return Folded("".join(parts), [token[0] for token in tokens], tokens)


def _separator(last: str | None, kind: str, space: bool, loose: bool) -> str:
    if last is None:
        return ""
    if last == "w" and kind == "w" and not space:
        return ""  # only invisible characters stood between: one word
    if loose or space:
        return " "
    return BOUND if "w" in (last, kind) else ""
