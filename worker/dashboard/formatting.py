"""How values read as text on the page: ages, durations, times, shares, and characters made visible.

``visible`` runs on every value a template prints, before the template escapes it: control, format
(bidi overrides, zero-width, tag characters) and separator characters become a visible ``⟨U+202E⟩``,
so a URL or a message cannot reorder the text around it, hide part of itself, or break a line.
"""

from __future__ import annotations

import time
import unicodedata

from markupsafe import Markup

# Cc: controls; Cf: format (bidi controls, zero-width, tag characters); Cs: lone surrogates;
# Zl, Zp: line and paragraph separators. Tab and newline stay: HTML reads them as plain spaces
# (and the job page's pretty JSON needs its newlines).
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
WHITESPACE = frozenset("\t\n")
DASH = "–"


def visible(value: object) -> object:
    """Jinja's ``finalize``: what the template prints; markup the templates built passes unchanged."""
    if value is None:
        return DASH
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    if value.isascii() and value.isprintable():
        return value
    return "".join(
        f"⟨U+{ord(ch):04X}⟩" if ch not in WHITESPACE and unicodedata.category(ch) in HIDDEN_CATEGORIES else ch
        for ch in value
    )


def age(seconds: float | None) -> str:
    if seconds is None:
        return DASH
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} d {hours % 24} h"


def duration_ms(ms: float | None) -> str:
    if ms is None:
        return DASH
    if ms < 1:
        return f"{ms:.2f} ms"
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return age(ms / 1000)


def timestamp(at: float | None) -> str:
    if at is None:
        return DASH
    millis = round(at * 1000) % 1000
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + f".{millis:03d} UTC"


def share(fraction: float | None) -> str:
    return DASH if fraction is None else f"{fraction * 100:.1f} %"


def dollars(amount: float | None) -> str:
    return DASH if amount is None else f"${amount:.4f}"
