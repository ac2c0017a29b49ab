"""What a person looking at a PDF page would not see, so the agent does not read it either.

A PDF can carry text that no viewer shows, and that is where an instruction aimed at a model hides
in a document a human has reviewed. Four carriers are recognised, each from facts PDFium reports
about a text object and what is drawn around it:

- text placed off the visible page (outside the intersection of its media and crop boxes);
- text in an invisible render mode (3, or 7: clip only) or painted fully transparent, unless an
  image that shows something (its pixels under the text differ) lies under or over it: that is
  how OCR puts a searchable layer on a scanned page, and the words are the ones in the picture. A
  blank image (one colour under the text, such as a 1x1 white image stretched over the page) shows
  nothing, and carries nothing;
- text too small to read (an effective size under 2 points once every scale on it is applied);
- text the colour of what lies beneath it: the bare white page, a filled box (black on black, red
  on red), or an image that is one colour under the text. What lies beneath is the paints drawn
  before the text under its centre, composed with their opacity over the white page; text whose
  painted colours, at their own opacity, are within ``NEAR_WHITE`` of it on every channel is not
  seen. An image whose pixels under the text vary is a picture, and text on it is seen.

The rules judge boxes, colours and the pixels of images, not a rendering: text covered by a shape
drawn after it, or clipped away by a clipping path, is not detected (a renderer would be needed, at
many times the cost).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import NamedTuple

# Under 2 points (0.7 mm on paper) no one reads text, on paper or on a screen at 100%.
MIN_READABLE_PT = 2.0
# A colour channel within this distance of white counts as white (#E7E7E7 and lighter), and text
# within it of what lies beneath, on every channel, is the colour of its background.
NEAR_WHITE = 24
# Under this opacity (of 255) a colour is not seen at all.
MIN_VISIBLE_ALPHA = 26
INVISIBLE_MODES = frozenset({3, 7})
FILL_MODES = frozenset({0, 2, 4, 6})
STROKE_MODES = frozenset({1, 2, 5, 6})

Rgba = tuple[int, int, int, int]
PAGE_WHITE: Rgba = (255, 255, 255, 255)


class Hidden(StrEnum):
    """Why a text object is not shown; the values are what the child reports, for tests and logs."""

    OFF_PAGE = "off_page"
    INVISIBLE = "invisible"
    TOO_SMALL = "too_small"
    WHITE_ON_NOTHING = "white_on_nothing"  # the colour of the bare page
    SAME_AS_BACKGROUND = "same_as_background"  # the colour of a fill or a blank image beneath it


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


class Beneath(NamedTuple):
    """What lies beneath a text object's centre: one colour, or None for a picture (pixels that
    vary, a shading) on which any text may be seen; ``drawn`` is False for the bare page."""

    color: Rgba | None
    drawn: bool


BARE_PAGE = Beneath(PAGE_WHITE, drawn=False)


def over(below: Rgba, paint: Rgba) -> Rgba:
    """``paint`` drawn over ``below`` at its own opacity (the result is opaque)."""
    alpha = paint[3] / 255
    r, g, b = (round(p * alpha + q * (1 - alpha)) for p, q in zip(paint[:3], below[:3], strict=True))
    return (r, g, b, 255)


def blends_in(color: Rgba, background: Rgba) -> bool:
    """Whether text of ``color`` (at its opacity) drawn on ``background`` differs from it by no more
    than ``NEAR_WHITE`` on any channel: the same colour to the eye."""
    shown = over(background, color)
    return max(abs(a - b) for a, b in zip(shown[:3], background[:3], strict=True)) <= NEAR_WHITE


def placement(box: Box, page: Box) -> bool | None:
    """True when the box lies on the visible page, False when wholly off it, None when it straddles
    the edge (the caller then judges each character)."""
    if box.within(page):
        return True
    return None if box.overlaps(page) else False


Question = Callable[[], bool]


def judge(
    look: TextLook, page: Box, *, image_shows: Question, beneath: Callable[[], Beneath]
) -> Hidden | None:
    """Why the text would not be seen, or None when it would.

    The two questions cost a look at the page's other objects (and an image's pixels), so they are
    asked only of the text that needs them: ``image_shows`` (does an image that shows something
    overlap the text? an OCR layer is then what the picture shows) of invisible text only;
    ``beneath`` (what lies under the text's centre) of text that is painted, on the page and large
    enough to read.
    """
    if placement(look.box, page) is False:
        return Hidden.OFF_PAGE
    colors = painted_colors(look)
    if look.mode in INVISIBLE_MODES or not colors:
        return None if image_shows() else Hidden.INVISIBLE
    if look.size < MIN_READABLE_PT:
        return Hidden.TOO_SMALL
    under = beneath()
    if under.color is not None and all(blends_in(color, under.color) for color in colors):
        return Hidden.SAME_AS_BACKGROUND if under.drawn else Hidden.WHITE_ON_NOTHING
    return None
