"""How values read as text on the page: ages, durations, times, shares, and characters made visible.

``visible`` runs on every value a template prints, before the template escapes it: control, format
(bidi overrides, zero-width, tag characters) and separator characters become a visible ``⟨U+202E⟩``,
so a URL or a message cannot reorder the text around it, hide part of itself, or break a line.
"""

from __future__ import annotations

import time
import unicodedata

from markupsafe import Markup, escape

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


# Where a long URL or query may break across lines: after these characters, as a reader would
# (and after each "&", escaped as "&amp;").
URL_BREAKS = ("/", "?", "=", "-", "_", ".")


def breakable(value: object) -> object:
    """A target shown with a line-break opportunity (``<wbr>``) after each of ``URL_BREAKS``, so
    a long URL wraps at its slashes, not at whatever character the column's width falls on. The
    text is made visible and escaped first: only the ``<wbr>`` elements are markup."""
    if not isinstance(value, str):
        return visible(value)
    text = str(escape(str(visible(value))))
    for mark in URL_BREAKS:
        text = text.replace(mark, mark + "<wbr>")
    text = text.replace(":/<wbr>/<wbr>", "://")  # the scheme's "://" stays whole
    return Markup(text.replace("&amp;", "&amp;<wbr>"))  # noqa: S704 - escaped above; only <wbr> added


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
