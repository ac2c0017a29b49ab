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
# Word runs, whitespace runs, one other character: linear, and fixed (never built from a quote).
_TOKEN = re.compile(r"(\w+)|(\s+)|(.)", re.DOTALL)


class Fold(Enum):
    STRICT = "strict"
    LOOSE = "loose"


@dataclass(frozen=True)
class Folded:
    """The folded text, and per emitted token where its folded form starts and which original
    characters it came from (separators belong to no token: a match never starts or ends on one)."""

    text: str
    starts: list[int]  # where each token's folded form starts in ``text``
    sources: list[int]  # where it starts in the original
    ends: list[int]  # where it ends in the original
    linear: list[bool]  # its folded form maps character for character onto the original

    def original_start(self, at: int) -> int:
        i = bisect_right(self.starts, at) - 1
        return self.sources[i] + (at - self.starts[i]) if self.linear[i] else self.sources[i]

    def original_end(self, end: int) -> int:
        """The original offset just past the folded character ``end - 1``."""
        i = bisect_right(self.starts, end - 1) - 1
        return self.sources[i] + (end - self.starts[i]) if self.linear[i] else self.ends[i]


def _is_mark(ch: str) -> bool:
    return unicodedata.category(ch)[0] == "M"


def _invisible(ch: str) -> bool:
    return ch in SOFT_HYPHENS or unicodedata.category(ch) in ("Cf", "Cc")


def _tokens(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) with kind "w", "s" or "p"; combining marks stay with what they mark."""
    out: list[tuple[int, int, str]] = []
    for m in _TOKEN.finditer(text):
        kind = "w" if m.group(1) is not None else "s" if m.group(2) is not None else "p"
        start, end = m.span()
        if out and out[-1][2] != "s":
            last = out[-1]
            if (kind == "p" and _is_mark(text[start])) or (kind == "w" and last[2] == "w"):
                out[-1] = (last[0], end, last[2])  # a mark, or the word it interrupted, goes on
                continue
        out.append((start, end, kind))
    return out


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


class _Writer:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.starts: list[int] = []
        self.sources: list[int] = []
        self.ends: list[int] = []
        self.linear: list[bool] = []

    def emit(self, sep: str, key: str, start: int, end: int) -> None:
        if sep:
            self.parts.append(sep)
            self.size += len(sep)
        self.parts.append(key)
        self.starts.append(self.size)
        self.sources.append(start)
        self.ends.append(end)
        self.linear.append(len(key) == end - start)
        self.size += len(key)

    def folded(self) -> Folded:
        return Folded("".join(self.parts), self.starts, self.sources, self.ends, self.linear)


def fold(text: str, how: Fold) -> Folded:
    """``text`` folded as ``how`` says, in one pass (linear in its length)."""
    loose = how is Fold.LOOSE
    out = _Writer()
    last: str | None = None  # "w" or "p": the kind of the last token written
    space = False  # whitespace since it
    newline = False  # a line break in that whitespace
    alpha_end = False  # the last word written ends in a letter
    hyphen: tuple[int, int, bool] | None = None  # LOOSE: a dash held after a word (start, end, shown)

    def flush_hyphen() -> None:
        nonlocal hyphen, last
        if hyphen is not None:
            start, end, shown = hyphen
            hyphen = None
            if shown:
                out.emit(" ", "-", start, end)
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
        key = _word_key(token, how) if kind == "w" else _other_key(token, how)
        if not key:
            continue
        if hyphen is not None and kind == "w" and key[0].isalpha() and (not space or newline):
            hyphen = None  # a word broken at a dash (or soft hyphen) goes on: one word again
            sep = ""
        else:
            flush_hyphen()
            sep = _separator(last, kind, space, loose)
        out.emit(sep, key, start, end)
        last, space, newline = kind, False, False
        alpha_end = kind == "w" and key[-1].isalpha()
    flush_hyphen()
    return out.folded()


def _separator(last: str | None, kind: str, space: bool, loose: bool) -> str:
    if last is None:
        return ""
    if last == "w" and kind == "w" and not space:
        return ""  # only invisible characters stood between: one word
    if loose or space:
        return " "
    return BOUND if "w" in (last, kind) else ""
