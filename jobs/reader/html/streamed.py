"""Content a page's own scripts put in place as it streams in, and declarative shadow roots.

React's streaming server rendering (React 18 and later, Next.js's app router) sends the shell
first, with a placeholder where a suspended part goes (``<template id="B:0">`` for a boundary,
``<template id="P:1">`` for a segment), then the part itself later in the body, inside
``<div hidden id="S:1">``, and a call ``$RC("B:0","S:1")`` (``$RR`` with styles) or
``$RS("S:1","P:1")`` that moves it into place and unhides it. A browser shows the part where the
placeholder stood; the hidden-content rule alone would drop the article. So a hidden element whose
id a page's ``$RC``/``$RR``/``$RS`` call names is read as shown, and its blocks are moved to where
the placeholder stood, taking the context there (inside ``<article>`` or ``<main>``). An ``S:n``
element that no call names stays hidden, as it does in a browser.

A ``<template shadowrootmode="open">`` (or ``closed``, or the older ``shadowroot``) is a declarative
shadow root: the browser renders it as its host's content, so it is read as it stands rather than
dropped like an inert template.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from jobs.reader.html.blocks import Block, Container
from jobs.reader.html.vocabulary import DROP, HIDDEN, TITLE

_SEGMENT = re.compile(r"(?:.{0,40}?)S:\d{1,9}", re.DOTALL)
_PLACEHOLDER = re.compile(r"(?:.{0,40}?)[BP]:\d{1,9}", re.DOTALL)
# $RC(boundary, segment) and $RR(boundary, segment, styles) complete a boundary; $RS(segment,
# placeholder) fills a segment's placeholder.
_CALL = re.compile(r'\$R([CRS])\(\s*"([^"\\]{1,60})"\s*,\s*"([^"\\]{1,60})"')
SHADOW_MODES = frozenset({"open", "closed"})
# The moved blocks take the context of the placeholder, except what only the template had.
_NOT_INHERITED = DROP | HIDDEN | TITLE
MAX_SEGMENTS = 512


def is_shadow_root(attrs: dict[str, str]) -> bool:
    """A ``<template>`` that the browser attaches as its parent's shadow root."""
    mode = attrs.get("shadowrootmode", attrs.get("shadowroot"))
    return mode is not None and mode.strip().lower() in SHADOW_MODES


@dataclass
class Streamed:
    """The streamed segments and placeholders of one page, met while it is reduced."""

    html: str
    _calls: dict[str, str] | None = None  # segment id -> the placeholder id it fills
    # id -> where it stood (the index of the next block), the context bits there, and the ids of
    # the block-level elements open around it
    placeholders: dict[str, tuple[int, int, frozenset[int]]] = field(default_factory=dict)
    segments: dict[str, int] = field(default_factory=dict)  # id -> its element's block id

    def shown_segment(self, name: str, attrs: dict[str, str], block_level: bool) -> str | None:
        """The id of a hidden segment a script moves into place, else None."""
        identifier = attrs.get("id", "")
        if not block_level or _SEGMENT.fullmatch(identifier) is None or len(self.segments) >= MAX_SEGMENTS:
            return None
        return identifier if identifier in self._moves() else None

    def placeholder(self, attrs: dict[str, str]) -> str | None:
        identifier = attrs.get("id", "")
        if _PLACEHOLDER.fullmatch(identifier) is None or len(self.placeholders) >= MAX_SEGMENTS:
            return None
        return identifier

    def _moves(self) -> dict[str, str]:
        # Read once, and only on a page that has a hidden S:n element: the scripts are skipped
        # unread by the tokenizer, and a page without streaming pays nothing.
        if self._calls is None:
            calls: dict[str, str] = {}
            if "$R" in self.html:
                for match in _CALL.finditer(self.html):
                    kind, first, second = match.groups()
                    segment, target = (first, second) if kind == "S" else (second, first)
                    calls.setdefault(segment, target)
                    if len(calls) >= MAX_SEGMENTS:
                        break
            self._calls = calls
        return self._calls

    def move_into_place(
        self, blocks: list[Block], containers: list[Container], pictures: list[tuple[int, Block]]
    ) -> None:
        """Move each shown segment's blocks to where its placeholder stood, in page order."""
        if not self.segments:
            return
        calls = self._moves()
        by_id = {container.id: container for container in containers}
        for segment, element in self.segments.items():
            container = by_id.get(element)
            target = self.placeholders.get(calls.get(segment, ""))
            if container is None or target is None:
                continue
            start, end = container.start, container.end
            at, bits, around = target
            if not at < start < end:
                continue  # a placeholder after its content, or nothing to move: left as it is
            _move(blocks, containers, start, end, at, around)
            # A picture inside the segment moves with it; one between the two shifts.
            pictures[:] = sorted(
                (
                    ((p - start + at if start <= p < end else _gap(p, start, end, at)), picture)
                    for p, picture in pictures
                ),
                key=lambda item: item[0],
            )
            inherited = bits & ~_NOT_INHERITED
            for block in blocks[at : at + end - start]:
                block.bits |= inherited
            for item in containers:
                if at <= item.start and item.end <= at + end - start:
                    item.bits |= inherited
            self.placeholders = {
                key: (_gap(position, start, end, at), kept, ids)
                for key, (position, kept, ids) in self.placeholders.items()
            }
        self.segments = {}  # moved once, however often the reduction's result is asked for


def _gap(position: int, start: int, end: int, at: int) -> int:
    """Where a position between blocks lands when blocks[start:end] move to ``at`` (< start)."""
    length = end - start
    if position <= at or position >= end:
        return position
    if position <= start:
        return position + length
    return position - start + at


def _move(
    blocks: list[Block], containers: list[Container], start: int, end: int, at: int, around: frozenset[int]
) -> None:
    """blocks[start:end] moved to stand before blocks[at], every container's range kept on the
    blocks it held: one inside the moved run moves with it, one around the placeholder (``around``)
    grows by it, one between the two shifts."""
    length = end - start
    blocks[at:end] = blocks[start:end] + blocks[at:start]
    for item in containers:
        s, e = item.start, item.end
        if s >= start and e <= end:
            item.start, item.end = s - start + at, e - start + at
        elif item.id in around:
            if e <= start:
                item.end = e + length
        elif s >= at and e <= start:
            item.start, item.end = s + length, e + length
        elif at <= s < start and e >= end:
            item.start = s + length  # held the segment but not the placeholder: keeps the rest
