"""svg and math: where foreign content starts and ends, and what of it a reader sees.

The boundaries follow html5lib's tree builder (the HTML standard's "in foreign content" rules), so
the reducer and a browser agree on which text is inside a drawing or a formula: an HTML tag such
as ``<p>`` breaks out of either; an end tag closes the foreign element it names, even across an
unclosed ``<foreignObject>``, ``<title>`` or ``<desc>``; inside those (and MathML's token
elements) HTML is parsed as HTML again.

What a reader sees: nothing of an svg (a drawing's labels and its ``<foreignObject>`` have no size
of their own to be read in), and a formula as linear text: its tokens in order, with ``/`` between
a fraction's parts, ``^`` and ``_`` before superscripts and subscripts, ``√`` before a root, and
neither its annotations (a TeX source, a content-markup twin) nor an ``<mphantom>`` (drawn
invisibly, to take up space).
"""

from __future__ import annotations

from jobs.reader.hidden import attributes_hide
from jobs.reader.html import elements as el
from jobs.reader.html.blocks import BlockWriter
from jobs.reader.html.open_elements import (
    HTML_POINT,
    MATH,
    MAX_WALK,
    SCOPING,
    SVG,
    TEXT_POINT,
    Open,
    OpenElements,
)
from jobs.reader.html.vocabulary import DROP, HIDDEN, NOT_TEXT

_TEXT_POINTS = frozenset({"mi", "mo", "mn", "ms", "mtext"})
_SVG_POINTS = frozenset({"foreignObject", "desc", "title"})
_HTML_ENCODINGS = ("text/html", "application/xhtml+xml")
# html5lib names svg elements in their mixed case; an HTML end tag (lower case) never matches these.
_MIXED_CASE_SVG = (
    "altGlyph",
    "altGlyphDef",
    "altGlyphItem",
    "animateColor",
    "animateMotion",
    "animateTransform",
    "clipPath",
    "feBlend",
    "feColorMatrix",
    "feComponentTransfer",
    "feComposite",
    "feConvolveMatrix",
    "feDiffuseLighting",
    "feDisplacementMap",
    "feDistantLight",
    "feFlood",
    "feFuncA",
    "feFuncB",
    "feFuncG",
    "feFuncR",
    "feGaussianBlur",
    "feImage",
    "feMerge",
    "feMergeNode",
    "feMorphology",
    "feOffset",
    "fePointLight",
    "feSpecularLighting",
    "feSpotLight",
    "feTile",
    "feTurbulence",
    "foreignObject",
    "glyphRef",
    "linearGradient",
    "radialGradient",
    "textPath",
)
_SVG_NAMES = {name.lower(): name for name in _MIXED_CASE_SVG}
# Text a reader sees between the parts of a layout element: {element: {child index: text}}.
_BETWEEN = {
    "mfrac": {1: "/"},
    "msup": {1: "^"},
    "msub": {1: "_"},
    "msubsup": {1: "_", 2: "^"},
    "mover": {1: "^"},
    "munder": {1: "_"},
    "munderover": {1: "_", 2: "^"},
}
_BEFORE = {"msqrt": "√"}
# A <font> with any of these breaks out of foreign content too (it was HTML formatting).
_FONT_BREAKS_OUT = frozenset({"color", "face", "size"})
_NOT_SHOWN = frozenset({"annotation", "annotation-xml"})
# Only the first child is shown: the rendering; the rest are alternatives (annotations, actions).
_FIRST_CHILD_ONLY = frozenset({"semantics", "maction"})


class ForeignContent:
    def __init__(self, stack: OpenElements, writer: BlockWriter) -> None:
        self._stack = stack
        self._writer = writer

    def in_foreign_node(self) -> bool:
        """The current node is svg or math: its end tags go by the foreign-content rules, and the
        tokenizer reads CDATA sections only there."""
        entries = self._stack.entries
        return bool(entries and entries[-1].ns)

    def takes_start(self, name: str) -> bool:
        """Whether a start tag goes by the foreign-content rules rather than the HTML ones."""
        entries = self._stack.entries
        if not entries:
            return False
        top = entries[-1]
        ns = top.ns
        if not ns or ns & HTML_POINT:
            return False
        if ns & TEXT_POINT:
            return name == "mglyph" or name == "malignmark"
        return not (name == "svg" and top.name == "annotation-xml")

    def start(self, name: str, attrs: dict[str, str], self_closing: bool) -> bool:
        """A start tag in foreign content; False when it breaks out and the HTML rules take it."""
        stack = self._stack
        entries = stack.entries
        if name in el.BREAKOUT or (name == "font" and not _FONT_BREAKS_OUT.isdisjoint(attrs)):
            while entries and entries[-1].ns and not entries[-1].ns & (HTML_POINT | TEXT_POINT):
                stack.pop_to(len(entries) - 1)
            return False
        self.insert(name, attrs, self_closing, entries[-1].ns & (SVG | MATH))
        return True

    def insert(self, name: str, attrs: dict[str, str], self_closing: bool, ns: int) -> None:
        """A foreign element: ``<svg>`` or ``<math>`` in HTML content, or any tag inside them."""
        stack = self._stack
        bits = stack.bits
        parent = stack.entries[-1] if stack.entries else None
        if parent is not None and parent.ns & MATH:
            bits = self._child_of(parent, bits)
        if ns == SVG:
            bits |= DROP
            name = _SVG_NAMES.get(name, name)
            if name in _SVG_POINTS:
                ns |= HTML_POINT | SCOPING
        elif name in _NOT_SHOWN or name == "mphantom":
            bits |= DROP if name in _NOT_SHOWN else HIDDEN
            if name == "annotation-xml":
                ns |= SCOPING
                if attrs.get("encoding", "").lower() in _HTML_ENCODINGS:
                    ns |= HTML_POINT
        else:
            if name in _TEXT_POINTS:
                ns |= TEXT_POINT | SCOPING
            if attrs and attributes_hide(attrs):
                bits |= HIDDEN
        if self_closing:
            return
        stack.push(name, bits, stack.context.kind, False, ns)
        if ns & MATH and name in _BEFORE and not bits & NOT_TEXT:
            self._writer.text(_BEFORE[name])

    def _child_of(self, parent: Open, bits: int) -> int:
        """A new child of a MathML element: the text between the parts, or not shown at all."""
        index = parent.children
        parent.children = index + 1
        if index and parent.name in _FIRST_CHILD_ONLY:
            return bits | DROP
        between = _BETWEEN.get(parent.name)
        if between and index in between and not bits & NOT_TEXT:
            self._writer.text(between[index])
        return bits

    def end(self, name: str) -> None:
        """An end tag while the current node is foreign: close the foreign element it names, or
        hand it to the HTML rules at the first HTML element below."""
        stack = self._stack
        entries = stack.entries
        index = len(entries) - 1
        lowest = max(-1, index - MAX_WALK)
        while index > lowest:
            if entries[index].name.lower() == name:
                stack.pop_to(index)
                return
            index -= 1
            if index < 0 or not entries[index].ns:
                stack.end(name)
                return
