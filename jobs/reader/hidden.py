"""What a person reading the page would not see, so the agent does not read it either.

Hidden text is the classic carrier of instructions aimed at a model ("ignore your previous
instructions...") that a human reviewing the page never sees. Two carriers are removed:

- elements hidden from a reader: the ``hidden`` attribute, ``aria-hidden="true"``, and an inline
  ``display:none``, ``visibility:hidden`` (or ``collapse``), or ``content-visibility:hidden``;
- invisible characters: every Unicode format character (category Cf: zero-width space and joiners,
  bidi embeddings, overrides, isolates and marks, the tag characters U+E0000..U+E007F, word joiner,
  BOM; the soft hyphen too, but uncounted), variation selectors (they can encode bytes after any
  visible character), Hangul fillers, the combining grapheme joiner, and control characters other
  than whitespace.
  One exception: a single ZWNJ or ZWJ between two non-ASCII letters (or emoji) is how Persian,
  the Indic scripts and emoji sequences are spelled, and stays.

``hidden="until-found"`` is not hidden: it marks collapsed sections that the browser's find reveals.
Styles from stylesheets and classes are out of reach without a CSS engine and are not evaluated.
"""

from __future__ import annotations

import re
import unicodedata

INVISIBLE = re.compile(
    "["
    "\x00-\x08\x0b\x0e-\x1f\x7f-\x9f"  # controls other than tab, newline, form feed, return
    "\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    "\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
    "]+"
)

SOFT_HYPHEN = "\u00ad"
_JOINERS = ("\u200c", "\u200d")
_CSS_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})[ \t\n\r\f]?|(.))", re.DOTALL)
_CSS_COMMENT = re.compile(r"/\*.*?(?:\*/|$)", re.DOTALL)
_HIDING_DECLARATION = re.compile(
    r"(?:^|;)(?:display:none|visibility:(?:hidden|collapse)|content-visibility:hidden)(?:!important)?(?:;|$)"
)
_STYLE_HINTS = ("none", "hidden", "collapse", "\\", "/*")


def strip_invisible(text: str) -> tuple[str, int]:
    """``text`` without invisible characters, and how many were removed."""
    if SOFT_HYPHEN in text:
        # A hyphenation hint, visible only at a line break; dropped so words read whole, and not
        # counted, since it hides nothing (German pages carry hundreds).
        text = text.replace(SOFT_HYPHEN, "")
    if INVISIBLE.search(text) is None:
        return text, 0
    cleaned = INVISIBLE.sub(_keep_joiner, text)
    return cleaned, len(text) - len(cleaned)


def _keep_joiner(match: re.Match[str]) -> str:
    # Persian, Urdu and the Indic scripts need ZWNJ and ZWJ inside words, and emoji sequences need
    # ZWJ: one such joiner between two non-ASCII letters (or emoji) is spelling, not a hiding place.
    # Two in a row, or one inside ASCII text, is removed like any other invisible character.
    run = match.group()
    if run not in _JOINERS:
        return ""
    text, at = match.string, match.start()
    if at == 0 or at + 1 >= len(text):
        return ""
    before, after = text[at - 1], text[at + 1]
    if before.isascii() or after.isascii():
        return ""
    shaped = {"L", "M", "S"} if run == "\u200d" else {"L", "M"}
    joined = unicodedata.category(before)[0] in shaped and unicodedata.category(after)[0] in shaped
    return run if joined else ""


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
    if attributes.get("aria-hidden", "").strip().lower() == "true":
        return True
    style = attributes.get("style")
    return style is not None and style_hides(style)
