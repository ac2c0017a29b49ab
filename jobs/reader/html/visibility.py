"""What of an element a sighted reader sees on the screen: the element rules of hidden content.

An element is hidden (its text dropped and counted in hidden_removed) when a browser does not
render it: the ``hidden`` attribute, an inline ``display:none``, ``visibility:hidden`` or
``content-visibility:hidden`` (hidden.py reads the style), a ``<dialog>`` that is not open, or
one of the utility classes that every CSS framework defines to clip text out of sight for screen
readers only (``sr-only``, ``visually-hidden``, ``screen-reader-text``...): the one place where a
class name is as good as a style, and a favourite place to hide words meant for a machine. It is
not hidden for being ``aria-hidden``: that hides it from screen readers only, and a sighted
reader still sees the "4.5 stars" of a rating badge.

A ``<select>`` shows its options as a list box when it is ``multiple`` or has a ``size`` above 1;
a drop-down shows only the selected option (the last one marked ``selected``, else the first),
and the rest of its list is dropped without counting as hidden, since a click shows it. A select
that is itself hidden (the ``hidden`` attribute, an inline ``display:none`` or ``visibility:hidden``,
a screen-reader-only class) shows none of its options, drop-down or list box: every option is
dropped and counted, as any hidden element's text is.
"""

from __future__ import annotations

import re

from jobs.reader.hidden import attributes_hide
from jobs.reader.html.blocks import BlockWriter
from jobs.reader.html.open_elements import Open, OpenElements
from jobs.reader.html.vocabulary import DROP, HIDDEN

# Bootstrap, Tailwind, WordPress, Drupal, Foundation, GOV.UK and the like, with their prefixes.
_SCREEN_READER_ONLY = re.compile(
    r"(?:^|\s)(?:[a-z0-9]+-)?(?:sr-only|visually-?hidden|screen-?reader-(?:text|only)|element-invisible|"
    r"show-for-sr)(?:-focusable)?(?:\s|$)",
    re.IGNORECASE,
)


def hiding_bits(name: str, attrs: dict[str, str]) -> int:
    """HIDDEN when the element's attributes (or, for a dialog, their absence) hide it."""
    if name == "dialog" and "open" not in attrs:
        return HIDDEN
    if not attrs:
        return 0
    if attributes_hide(attrs):
        return HIDDEN
    classes = attrs.get("class")
    return HIDDEN if classes and _SCREEN_READER_ONLY.search(classes) else 0


class SelectDisplay:
    """Which options of the open ``<select>`` are on the screen."""

    def __init__(self, stack: OpenElements, writer: BlockWriter) -> None:
        self._stack = stack
        self._writer = writer
        self._select: Open | None = None
        self._outer_bits = 0  # the bits around the select, which its shown options have
        self._hidden = False  # the select itself is hidden: no option is shown
        self._list_box = False
        self._shown: tuple[int, int] | None = None  # blocks and containers before the shown option

    def opened(self, attrs: dict[str, str]) -> None:
        """A select was just pushed on the stack."""
        entries = self._stack.entries
        self._select = entries[-1]
        self._outer_bits = entries[-2].bits if len(entries) > 1 else self._stack.root_bits
        # The select's own bits carry DROP (its loose text is never shown), which keeps the
        # element rules from being asked of it when it is pushed: they are asked here.
        self._hidden = bool(hiding_bits("select", attrs))
        size = attrs.get("size", "").strip()
        self._list_box = "multiple" in attrs or (size.isdigit() and int(size[:6]) > 1)
        self._shown = None

    def option_bits(self, bits: int, attrs: dict[str, str]) -> int:
        """The bits of an option: a list box's are the select's surroundings; a drop-down's are
        dropped unless it is the one shown."""
        if not self._inside_select():
            return bits
        shown = self._outer_bits
        if self._hidden:
            return shown | HIDDEN  # counted, not DROP: the options are hidden text like any other
        if self._list_box:
            return shown
        writer = self._writer
        if "selected" in attrs:
            if self._shown is not None:
                # A later option marked selected replaces the one shown so far.
                writer.flush()
                writer.discard_from(*self._shown)
            self._shown = (len(writer.blocks), len(writer.containers))
            return shown
        if self._shown is None:
            self._shown = (len(writer.blocks), len(writer.containers))
            return shown
        return bits | DROP

    def _inside_select(self) -> bool:
        select = self._select
        if select is None:
            return False
        entries = self._stack.entries
        if len(entries) > select.depth and entries[select.depth] is select:
            return True
        self._select = None
        return False
