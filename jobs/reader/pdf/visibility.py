"""What a person looking at a PDF page would not see, so the agent does not read it either.

A PDF can carry text that no viewer shows, and that is where an instruction aimed at a model hides
in a document a human has reviewed. Four carriers are recognised, each from facts PDFium reports
about a text object:

- text placed off the visible page (outside the intersection of its media and crop boxes);
- text in an invisible render mode (3, or 7: clip only) or painted fully transparent, unless an
  image lies under or over it: that is how OCR puts a searchable layer on a scanned page, and the
  words are the ones in the picture;
- text too small to read (an effective size under 2 points once every scale on it is applied);
- near-white text with nothing darker drawn beneath it: on the white page it cannot be seen.

The rules judge boxes and colours, not pixels: text covered by a shape drawn after it, or clipped
away by a clipping path, is not detected (a renderer would be needed, at many times the cost).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import NamedTuple

# Under 2 points (0.7 mm on paper) no one reads text, on paper or on a screen at 100%.
MIN_READABLE_PT = 2.0
# A colour channel within this distance of white counts as white (#E7E7E7 and lighter).
NEAR_WHITE = 24
# Under this opacity (of 255) a colour is not seen at all.
MIN_VISIBLE_ALPHA = 26
INVISIBLE_MODES = frozenset({3, 7})
FILL_MODES = frozenset({0, 2, 4, 6})
STROKE_MODES = frozenset({1, 2, 5, 6})

Rgba = tuple[int, int, int, int]


class Hidden(StrEnum):
    """Why a text object is not shown; the values are what the child reports, for tests and logs."""

    OFF_PAGE = "off_page"
    INVISIBLE = "invisible"
    TOO_SMALL = "too_small"
    WHITE_ON_NOTHING = "white_on_nothing"


class Box(NamedTuple):
    """A rectangle in page space (PDF points, y upwards). A tuple: pages build thousands."""

    left: float
    bottom: float
    right: float
    top: float

    @property
    def center(self) -> tuple[float, float]:
        return (self.left + self.right) / 2, (self.bottom + self.top) / 2

    def contains(self, x: float, y: float) -> bool:
        return self.left <= x <= self.right and self.bottom <= y <= self.top

    def overlaps(self, other: Box) -> bool:
        return (
            self.left < other.right
            and other.left < self.right
            and self.bottom < other.top
            and other.bottom < self.top
        )

    def within(self, other: Box) -> bool:
        return (
            other.left <= self.left
            and self.right <= other.right
            and other.bottom <= self.bottom
            and self.top <= other.top
        )


class TextLook(NamedTuple):
    """How one text object is painted: everything the rules need to know about it."""

    box: Box  # in page space
    mode: int  # the text render mode, 0..7
    fill: Rgba
    stroke: Rgba
    size: float  # effective size in points: the font size times every scale applied to it


def painted_colors(look: TextLook) -> list[Rgba]:
    """The colours the render mode actually paints, leaving out transparent ones."""
    colors = []
    if look.mode in FILL_MODES:
        colors.append(look.fill)
    if look.mode in STROKE_MODES:
        colors.append(look.stroke)
    return [color for color in colors if color[3] >= MIN_VISIBLE_ALPHA]


def near_white(color: Rgba) -> bool:
    return min(color[:3]) >= 255 - NEAR_WHITE


def placement(box: Box, page: Box) -> bool | None:
    """True when the box lies on the visible page, False when wholly off it, None when it straddles
    the edge (the caller then judges each character)."""
    if box.within(page):
        return True
    return None if box.overlaps(page) else False


Question = Callable[[], bool]


def judge(look: TextLook, page: Box, *, image_near: Question, darker_beneath: Question) -> Hidden | None:
    """Why the text would not be seen, or None when it would.

    The two questions cost a look at the page's other objects, so they are asked only of the text
    that needs them: ``image_near`` (does an image overlap the text? an OCR layer is then what the
    picture shows) of invisible text, ``darker_beneath`` (is a fill or image that is not near-white
    drawn beneath the text's centre?) of near-white text.
    """
    if placement(look.box, page) is False:
        return Hidden.OFF_PAGE
    colors = painted_colors(look)
    if look.mode in INVISIBLE_MODES or not colors:
        return None if image_near() else Hidden.INVISIBLE
    if look.size < MIN_READABLE_PT:
        return Hidden.TOO_SMALL
    if all(near_white(color) for color in colors) and not darker_beneath():
        return Hidden.WHITE_ON_NOTHING
    return None
