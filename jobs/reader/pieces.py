"""A long document read in pieces, and searched: offsets into its whole text, never a regex.

A piece is the characters ``[offset, next_offset)`` of the whole text (characters are Unicode code
points, as Python and JSON count them), so the pieces joined in order are the whole. A piece that
stops short of the whole ends at a paragraph break, a sentence's end or a word boundary when one
lies in its last tenth (in that order of preference), so no piece ends mid-word when it need not.
It may also end a little earlier so it never ends between a letter and its combining marks, inside
a Markdown escape (a backslash whose escaped character would start the next piece), or between the
two halves of a lone surrogate pair; ``next_offset`` says where the next piece starts.

``find`` is untrusted text: it is folded like the document (case folded, every run of whitespace one
space) and searched with ``str.find``, which is linear in the document, so no argument can make a
search slow. Matches are mapped back to offsets in the whole text.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass

from jobs.reader.markdown_escape import unescaped

# How far a piece's end may back off to avoid a seam; past this, a run of combining marks (an
# attack on renderers, not writing) is cut like anything else.
MAX_BACKOFF = 32
SNIPPET_CHARS = 300
# A piece that stops short of the whole ends at a boundary found in its last 1/BOUNDARY_SHARE.
BOUNDARY_SHARE = 10
# A sentence's end: its stop (not a Markdown escape's), any closing quotes or brackets, then a space.
_SENTENCE_END = re.compile(r"(?<!\\)[.!?][\"'\u2019\u201d)\]]*\s+")
MAX_MATCHES = 20
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Piece:
    text: str
    offset: int
    next_offset: int | None  # None when the piece reaches the end of the whole


@dataclass(frozen=True)
class Match:
    offset: int  # where the match starts in the whole text
    snippet: str  # up to SNIPPET_CHARS around it, on word boundaries where there are any


def piece(whole: str, offset: int, max_chars: int, *, markdown: bool) -> Piece:
    """The piece of ``whole`` that starts at ``offset`` (0 <= offset <= len(whole))."""
    end = min(len(whole), offset + max_chars)
    if end < len(whole):
        end = _seam(whole, offset, boundary(whole, offset, end), markdown=markdown)
    return Piece(whole[offset:end], offset, end if end < len(whole) else None)


def boundary(whole: str, start: int, end: int) -> int:
    """Where a piece ``[start, end)`` that stops short of the whole should end: after the last
    paragraph break in its last tenth, else after the last sentence's end there, else at the last
    word boundary there, else at ``end`` (a word longer than a tenth of the piece is cut)."""
    floor = max(start + 1, end - (end - start) // BOUNDARY_SHARE)
    if floor >= end:
        return end
    if (at := whole.rfind("\n\n", max(start, floor - 2), end)) >= 0 and at + 2 >= floor:
        return at + 2
    last = None
    # From a little before the tenth: a sentence's stop may sit just before it with the space that
    # ends the sentence inside it (closers and spaces longer than MAX_BACKOFF fall to the word rule).
    for last in _SENTENCE_END.finditer(whole, max(start, floor - 1 - MAX_BACKOFF), end):  # noqa: B007
        pass
    if last is not None and last.end() >= floor:
        return last.end()
    if whole[end].isspace() or whole[end - 1].isspace():
        return end
    for at in range(end - 1, floor - 2, -1):
        if whole[at].isspace():
            return at + 1
    return end


def _seam(whole: str, start: int, end: int, *, markdown: bool) -> int:
    """``end`` moved back (not past ``start + 1``) so the piece does not end inside a character."""
    floor = max(start + 1, end - MAX_BACKOFF)
    cut = end
    while cut > floor and _joins(whole, cut, markdown=markdown):
        cut -= 1
    return cut if not _joins(whole, cut, markdown=markdown) else end


def _joins(whole: str, cut: int, *, markdown: bool) -> bool:
    """Whether the characters either side of ``cut`` belong together."""
    after, before = whole[cut], whole[cut - 1]
    if unicodedata.combining(after) or after in "\u200d\ufe0f":
        return True
    if "\ud800" <= before <= "\udbff" and "\udc00" <= after <= "\udfff":
        return True
    # An odd run of backslashes ends in an escape that takes the next character with it.
    return markdown and before == "\\" and _backslashes(whole, cut) % 2 == 1


def _backslashes(whole: str, cut: int) -> int:
    """The backslashes just before ``cut`` (counted up to a bound: a longer run is cut anyway)."""
    run = 0
    while run < cut and run < 2 * MAX_BACKOFF and whole[cut - run - 1] == "\\":
        run += 1
    return run


@dataclass(frozen=True)
class Folded:
    """A text case-folded with its whitespace runs collapsed, and the way back to its offsets.

    The text is folded in blocks of ``FOLD_BLOCK`` characters, each by one regular-expression
    substitution (C speed); the way back from a folded offset re-walks only its own block.
    """

    text: str
    source: str  # the text before folding
    lowered: str  # the source lower-cased, offset for offset
    folded_starts: list[int]  # where each block's fold starts in ``text``
    skips: list[int]  # 1 when a block's fold lost its leading space to the block before it

    def source_offset(self, folded_offset: int) -> int:
        index = bisect.bisect_right(self.folded_starts, folded_offset) - 1
        start = index * FOLD_BLOCK
        block = self.lowered[start : start + FOLD_BLOCK]
        wanted = folded_offset - self.folded_starts[index] + self.skips[index]
        position = length = 0
        for gap in _SPACES.finditer(block):
            run = gap.start() - position
            if wanted < length + run:
                break
            length += run
            if wanted == length:
                return start + gap.start()
            length += 1
            position = gap.end()
        return min(len(self.source), start + position + (wanted - length))


FOLD_BLOCK = 4096


def fold(text: str) -> Folded:
    """Case-fold ``text`` and collapse each whitespace run to one space, keeping the way back.

    Lower-casing keeps offsets when it keeps the length (almost always); when a character lowers to
    more than one (``İ``), that character is left as it is, so offsets still map one to one.
    """
    lowered = text.lower()
    if len(lowered) != len(text):
        lowered = "".join(low if len(low := c.lower()) == 1 else c for c in text)
    parts: list[str] = []
    starts: list[int] = []
    skips: list[int] = []
    length = 0
    ends_in_space = False
    for start in range(0, max(1, len(lowered)), FOLD_BLOCK):
        folded = _collapse(lowered[start : start + FOLD_BLOCK])
        skip = 1 if ends_in_space and folded.startswith(" ") else 0
        folded = folded[skip:]
        starts.append(length)
        skips.append(skip)
        parts.append(folded)
        length += len(folded)
        if folded:
            ends_in_space = folded.endswith(" ")
    return Folded("".join(parts), text, lowered, starts, skips)


def _collapse(block: str) -> str:
    """Each whitespace run one space, as ``\\s+`` -> " " would, at ``str.split`` speed (both ask
    ``str.isspace``)."""
    words = block.split()
    if not words:
        return " " if block else ""
    lead = " " if block[0].isspace() else ""
    trail = " " if block[-1].isspace() else ""
    return lead + " ".join(words) + trail


def needle_of(find: str) -> str:
    """The folded form ``find`` is searched as ("" when nothing but whitespace is left)."""
    return fold(find).text.strip(" ")


def find(whole: str, needle: str, *, markdown: bool = False) -> list[Match]:
    """Up to MAX_MATCHES non-overlapping matches of the folded ``needle``, in document order.

    In Markdown the search runs over what a reader sees (``markdown_escape.unescaped``: every
    backslash escape undone, so ``snake_case`` is found in ``snake\\_case``), and each match is
    mapped back into the Markdown: it starts at the escape of its first character, when it has one,
    so ``whole[offset:end]`` is the match as the Markdown writes it."""
    seen, escapes = unescaped(whole) if markdown else (whole, [])
    folded = fold(seen)

    def in_whole(at: int) -> int:
        return at + bisect.bisect_right(escapes, at)

    matches: list[Match] = []
    at = folded.text.find(needle)
    while at >= 0 and len(matches) < MAX_MATCHES:
        first = folded.source_offset(at)
        start = in_whole(first - 1) + 1 if first > 0 else 0
        end = in_whole(folded.source_offset(at + len(needle) - 1)) + 1
        matches.append(Match(start, snippet(whole, start, end)))
        at = folded.text.find(needle, at + len(needle))
    return matches


def snippet(whole: str, start: int, end: int) -> str:
    """Up to SNIPPET_CHARS of ``whole`` around ``[start, end)``, cut at word boundaries, whitespace
    collapsed."""
    room = SNIPPET_CHARS - (end - start)
    if room <= 0:
        return " ".join(whole[start : start + SNIPPET_CHARS].split())
    left = max(0, start - room // 2)
    right = min(len(whole), end + room - (start - left))
    left = max(0, min(left, right - SNIPPET_CHARS))
    if left > 0 and (space := whole.find(" ", left, start)) >= 0:
        left = space + 1
    if right < len(whole) and (space := whole.rfind(" ", end, right)) >= 0:
        right = space
    return " ".join(whole[left:right].split())
