"""What a person reading the page would not see, so the agent does not read it either.

Hidden text is the classic carrier of instructions aimed at a model ("ignore your previous
instructions...") that a human reviewing the page never sees. Two carriers are removed:

- elements a browser does not render: the ``hidden`` attribute, and an inline ``display:none``,
  ``visibility:hidden`` (or ``collapse``), or ``content-visibility:hidden`` (visibility.py adds
  the element rules: a closed ``<dialog>``, a drop-down's other options...). ``aria-hidden`` is
  not among them: it hides text from screen readers, not from the eyes;
- invisible characters: every Unicode format character (category Cf: zero-width space and joiners,
  bidi embeddings, overrides, isolates and marks, the tag characters U+E0000..U+E007F, word joiner,
  BOM; the soft hyphen too, but uncounted), variation selectors (they can encode bytes after any
  visible character), Hangul fillers, the combining grapheme joiner, and control characters other
  than whitespace.
  One exception: a single ZWNJ or ZWJ between two non-ASCII letters (or emoji) is how Persian,
  the Indic scripts and emoji sequences are spelled, and stays.

``hidden="until-found"`` is not hidden: it marks collapsed sections that the browser's find reveals.
Styles from stylesheets and classes are out of reach without a CSS engine and are not evaluated.
Invisible characters are stripped in pieces (InvisibleStripper), so the caller can yield between
them: a body of letters and zero-width joiners costs about a microsecond a pair to judge.
"""

from __future__ import annotations

import re
import unicodedata

# Every invisible character but the two joiners, which are sometimes spelling (see _keep_joiner).
_INVISIBLE_BUT_JOINERS = (
    "\x00-\x08\x0b\x0e-\x1f\x7f-\x9f"  # controls other than tab, newline, form feed, return
    "\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    "\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
)
_JOINER_CLASS = "\u200c\u200d"
INVISIBLE = re.compile(f"[{_INVISIBLE_BUT_JOINERS}{_JOINER_CLASS}]+")
# A run of invisible characters goes whatever surrounds it, unless it is one joiner alone.
_RUN_NOT_A_LONE_JOINER = re.compile(
    f"[{_JOINER_CLASS}]*[{_INVISIBLE_BUT_JOINERS}][{_INVISIBLE_BUT_JOINERS}{_JOINER_CLASS}]*"
    f"|[{_JOINER_CLASS}]{{2,}}"
)
# A lone joiner at either end of the text, or beside an ASCII character, joins nothing.
_LONE_JOINER_BESIDE_ASCII = re.compile(
    f"(?<![^\x00-\x7f])[{_JOINER_CLASS}]|[{_JOINER_CLASS}](?![^\x00-\x7f])"
)
_ASTRAL = "\U00010000-\U0010ffff"
# Beside anything astral (an emoji, a historic script) a joiner is judged one by one (_keep_joiner).
_JOINER_BESIDE_ASTRAL = re.compile(f"(?<=[{_ASTRAL}])[{_JOINER_CLASS}]|[{_JOINER_CLASS}](?=[{_ASTRAL}])")
_INVISIBLE_AT_START = re.compile(f"[{_INVISIBLE_BUT_JOINERS}{_JOINER_CLASS}]+")
# Stands for a run of invisible characters already judged (it is removed, whatever follows).
_RUN_MARK = "\u200b"

SOFT_HYPHEN = "\u00ad"
_JOINERS = ("\u200c", "\u200d")
_ZWJ_JOINS = frozenset("LMS")  # letters, marks and symbols (emoji)
_ZWNJ_JOINS = frozenset("LM")
_CSS_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})[ \t\n\r\f]?|(.))", re.DOTALL)
_CSS_COMMENT = re.compile(r"/\*.*?(?:\*/|$)", re.DOTALL)
_HIDING_DECLARATION = re.compile(
    r"(?:^|;)(?:display:none|visibility:(?:hidden|collapse)|content-visibility:hidden)(?:!important)?(?:;|$)"
)
_STYLE_HINTS = ("none", "hidden", "collapse", "\\", "/*")


def strip_invisible(text: str) -> tuple[str, int]:
    """``text`` without invisible characters, and how many were removed."""
    stripper = InvisibleStripper()
    cleaned = stripper.feed(text)
    stripper.finish()
    return cleaned, stripper.removed


class InvisibleStripper:
    """strip_invisible for text that arrives in pieces: the pieces fed in order, then ``finish``,
    give what one call on the whole text gives, at a cost proportional to each piece.

    Only a lone joiner depends on its neighbours, so the stripper keeps the last visible character
    it has passed on (the next joiner's left neighbour) and holds back a run of invisible
    characters at the end of a piece until the next piece says how it ends.
    """

    def __init__(self) -> None:
        self._before = ""  # the last visible character passed on, or "" at the start
        self._held = ""  # a trailing lone joiner, _RUN_MARK for a longer run, or ""
        self._in = 0
        self._out = 0

    @property
    def removed(self) -> int:
        """Invisible characters removed so far (a held run counts once ``finish`` drops it)."""
        undecided = 1 if self._held in _JOINERS else 0
        return self._in - self._out - undecided

    def feed(self, piece: str) -> str:
        if SOFT_HYPHEN in piece:
            # A hyphenation hint, visible only at a line break; dropped so words read whole, and not
            # counted, since it hides nothing (German pages carry hundreds).
            piece = piece.replace(SOFT_HYPHEN, "")
        if not piece:
            return ""
        self._in += len(piece)
        if not self._held and INVISIBLE.search(piece) is None:
            self._before = piece[-1]
            self._out += len(piece)
            return piece
        text = self._before + self._held + piece
        trailing = _INVISIBLE_AT_START.match(text[::-1])
        run = trailing.end() if trailing else 0
        body, tail = text[: len(text) - run], text[len(text) - run :]
        if tail in _JOINERS or not tail:
            self._held = tail
        else:
            self._held = _RUN_MARK
        cleaned = _strip(body)[len(self._before) :] if body else ""
        if body:
            self._before = body[-1]
        self._out += len(cleaned)
        return cleaned

    def finish(self) -> None:
        """The end of the text: a held run (or a lone joiner with nothing after it) is removed."""
        self._held = ""


def _strip(text: str) -> str:
    # Persian, Urdu and the Indic scripts need ZWNJ and ZWJ inside words, and emoji sequences need
    # ZWJ: one such joiner between two non-ASCII letters (or emoji) is spelling, not a hiding place.
    # Two in a row, or one inside ASCII text, is removed like any other invisible character. Each
    # pass is one regular expression over the text, so a page of letters and joiners costs no
    # Python call per joiner; only joiners beside astral characters are judged one by one.
    if INVISIBLE.search(text) is None:
        return text
    text = _RUN_NOT_A_LONE_JOINER.sub("", text)
    text = _LONE_JOINER_BESIDE_ASCII.sub("", text)
    if "\u200c" in text:
        text = _ZWNJ_BESIDE_NO_LETTER.sub("", text)
    if "\u200d" in text:
        text = _ZWJ_BESIDE_NO_LETTER.sub("", text)
    if "\u200c" in text or "\u200d" in text:
        text = _JOINER_BESIDE_ASTRAL.sub(_keep_joiner, text)
    return text


def _not_of(categories: frozenset[str]) -> str:
    """A character class of the non-ASCII BMP characters whose category is none of ``categories``
    (built once at import, in a few tens of milliseconds)."""
    ranges: list[tuple[int, int]] = []
    for code in range(0x80, 0x10000):
        if 0xD800 <= code <= 0xDFFF or unicodedata.category(chr(code))[0] in categories:
            continue
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    return "".join(f"\\u{low:04x}-\\u{high:04x}" for low, high in ranges)


def _lone_joiner_beside_no_letter(joiner: str, joins: frozenset[str]) -> re.Pattern[str]:
    others = _not_of(joins)
    return re.compile(f"(?<=[{others}]){joiner}|{joiner}(?=[{others}])")


_ZWNJ_BESIDE_NO_LETTER = _lone_joiner_beside_no_letter("\u200c", _ZWNJ_JOINS)
_ZWJ_BESIDE_NO_LETTER = _lone_joiner_beside_no_letter("\u200d", _ZWJ_JOINS)


def _keep_joiner(match: re.Match[str]) -> str:
    joiner, text, at = match.group(), match.string, match.start()
    joins = _ZWJ_JOINS if joiner == "\u200d" else _ZWNJ_JOINS
    before, after = text[at - 1], text[at + 1]
    if unicodedata.category(before)[0] in joins and unicodedata.category(after)[0] in joins:
        return joiner
    return ""


def style_hides(style: str) -> bool:
    """True when an inline style hides its element, however it is spelled.

    Escapes (``display:\\6e one``), comments (``display:/**/none``), case and spacing are undone
    first, the way the browser's CSS parser reads them, so a spelling we miss cannot show the
    agent text the reader never sees.
    """
    lowered = style.lower()
    if not any(hint in lowered for hint in _STYLE_HINTS):
        return False
    if "\\" in lowered:
        lowered = _CSS_ESCAPE.sub(_unescape, lowered).lower()
    if "/*" in lowered:
        lowered = _CSS_COMMENT.sub("", lowered)
    compact = "".join(lowered.split())
    return _HIDING_DECLARATION.search(compact) is not None


def _unescape(match: re.Match[str]) -> str:
    if match.group(1) is not None:
        code = int(match.group(1), 16)
        return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"
    return match.group(2)


def attributes_hide(attributes: dict[str, str]) -> bool:
    hidden = attributes.get("hidden")
    if hidden is not None and hidden.strip().lower() != "until-found":
        return True
    style = attributes.get("style")
    return style is not None and style_hides(style)
