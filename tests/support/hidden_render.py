"""Pages whose stylesheets hide text from a reader by each technique, and pages whose styling is
unusual but visible; each phrase is unique, so a rendered page shows which survived.

``HIDDEN``: technique -> (CSS rule for ``.t``, markup holding the phrase). ``VISIBLE`` the same for
text a sighted reader does see. ``page`` puts a family into one document, each in its own block
with its own class, so one render judges every member.
"""

from __future__ import annotations

import re

SHOWN = "This paragraph is plainly visible to every reader."

HIDDEN: dict[str, tuple[str, str]] = {
    "opacity-0": ("opacity: 0", "Opacity zero secret instruction alpha."),
    "font-size-0": ("font-size: 0", "Font size zero secret instruction bravo."),
    "off-screen-left": ("position: absolute; left: -9999px", "Off screen secret instruction charlie."),
    "off-screen-top": ("position: absolute; top: -5000px", "Above the page secret instruction delta."),
    "clip-rect": (
        "position: absolute; clip: rect(0 0 0 0); width: 1px; height: 1px; overflow: hidden",
        "Clip rect secret instruction echo.",
    ),
    "scale-0": ("transform: scale(0)", "Scaled to nothing secret instruction foxtrot."),
    "height-0-overflow": ("height: 0; overflow: hidden", "Zero height secret instruction golf."),
    "same-colour-white": ("color: #fff; background: #fff", "White on white secret instruction hotel."),
    "same-colour-page": ("color: rgb(250, 250, 240)", "Page coloured secret instruction india."),
    "clip-path-inset": ("clip-path: inset(50%)", "Clip path inset secret instruction juliet."),
    "clip-path-circle": ("clip-path: circle(0)", "Clip path circle secret instruction kilo."),
    "colour-transparent": ("color: transparent", "Transparent secret instruction lima."),
    "text-indent": ("text-indent: -99999px", "Indented away secret instruction mike."),
    "width-0-overflow": ("width: 0; overflow: hidden; white-space: nowrap", "Zero width secret november."),
    "scale-x-0": ("transform: scaleX(0)", "Flattened secret instruction oscar."),
}

VISIBLE: dict[str, tuple[str, str]] = {
    "small-font": ("font-size: 9px", "Small print that is still readable papa."),
    "light-on-dark": ("color: #eee; background: #222", "Light text on a dark band quebec."),
    "sticky-header": ("position: sticky; top: 0; background: #fff", "Sticky header navigation romeo."),
    "fixed-header": ("position: fixed; top: 0; left: 0; background: #fff", "Fixed banner text sierra."),
    "scroll-container": (
        "height: 40px; overflow: auto",
        "<div style='height: 400px'>Top of the scroller tango.</div><p>Scrolled into view uniform.</p>",
    ),
    "grey-footer": ("color: #999", "Grey footer text victor."),
    "half-opacity": ("opacity: 0.5", "Half opacity caption whiskey."),
    "below-the-fold": ("margin-top: 3000px", "Far down the page xray."),
    "hero-overlay": (
        "position: relative; background: #fff",
        "<div style='height: 80px; background: #036'></div>"
        "<p style='position: absolute; top: 10px; color: #fff'>White text on a dark image yankee.</p>",
    ),
    "closed-details": ("", "<details><summary>More</summary>Folded answer zulu.</details>"),
    "rotated": ("transform: rotate(-5deg)", "Rotated label amber."),
    "coloured-on-coloured": ("color: #fff; background: #c00", "White on red notice cobalt."),
}


def page(family: dict[str, tuple[str, str]]) -> str:
    """One document with every member of ``family`` (and ``SHOWN``), each under its own class."""
    rules = "".join(f".t{i} {{ {css} }}" for i, (css, _) in enumerate(family.values()))
    blocks = "".join(f'<div class="t{i}">{markup}</div>' for i, (_, markup) in enumerate(family.values()))
    return (
        "<!doctype html><html><head><title>Styles</title>"
        f"<style>body {{ background: rgb(250, 250, 240); }} {rules}</style></head>"
        f"<body><h1>Styled page</h1><p>{SHOWN}</p>{blocks}</body></html>"
    )


def phrases(markup: str) -> list[str]:
    """The text of a member's markup (tags stripped), one entry per text run."""
    return [part.strip() for part in re.split(r"<[^>]*>", markup) if part.strip()]


def chars(text: str) -> int:
    """Characters as ``hidden_removed`` counts them: whitespace left out."""
    return len(re.sub(r"\s+", "", text))
