"""What an image on a PDF page shows under a box: one colour, or a picture.

Being an image says nothing about what a reader sees: a 1x1 white image stretched over the page
is a white page, and text in it is as hidden as text on the bare page. So the visibility rules ask
what the image's own pixels are under the text: ``flat_color`` reads the image as PDFium decodes
it (at its own resolution, before scaling: a stretched 1x1 image is one pixel), maps the text's box
into the image through the image's matrix, and samples a grid of its pixels there. Pixels that
differ by more than ``NEAR_WHITE`` on a channel are a picture (a scan's words, a photo); otherwise
the image is that one colour under the text.

This runs inside the PDF child, under its memory and CPU limits. An image is decoded once per page
however many texts ask about it, and one too large to decode cheaply (``MAX_PIXELS``) counts as a
picture: judging it would cost more than the text it might hide.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import pypdfium2.raw as raw

from jobs.reader.pdf import bindings as call
from jobs.reader.pdf.visibility import NEAR_WHITE, Box, Rgba

# Twenty-five megapixels: a page scanned at 600 dpi. Larger images are judged pictures, unread.
MAX_PIXELS = 25_000_000
# A grid of this many samples a side over the box's pixels: a word's strokes cannot slip between.
SAMPLES = 24
Matrix = tuple[float, float, float, float, float, float]
# PDFium's bitmap formats, by bytes per pixel; an unknown format is a picture.
BYTES_PER_PIXEL = {
    raw.FPDFBitmap_Gray: 1,
    raw.FPDFBitmap_BGR: 3,
    raw.FPDFBitmap_BGRx: 4,
    raw.FPDFBitmap_BGRA: 4,
}


class Pixels:
    """One image's decoded pixels (none when it cannot or should not be read). The decoded bitmap
    is kept, not copied, until ``close``: only the rows sampled under a text are ever read."""

    def __init__(self, handle: Any, to_page: Matrix) -> None:
        self.width = self.height = self.stride = self.depth = 0
        self._bitmap: Any = None
        self._buffer = 0
        self._inverse = _inverse(to_page)
        width, height = ctypes.c_uint(), ctypes.c_uint()
        if not call.image_pixel_size(handle, ctypes.byref(width), ctypes.byref(height)):
            return
        if not 0 < width.value * height.value <= MAX_PIXELS:
            return
        bitmap = call.image_bitmap(handle)
        if not bitmap:
            return
        self._bitmap = bitmap
        depth = BYTES_PER_PIXEL.get(call.bitmap_format(bitmap), 0)
        self.width, self.height = call.bitmap_width(bitmap), call.bitmap_height(bitmap)
        self.stride = call.bitmap_stride(bitmap)
        buffer = call.bitmap_buffer(bitmap)
        if depth and buffer and self.width > 0 and self.height > 0 and self.stride >= self.width * depth:
            self.depth = depth
            self._buffer = buffer

    def close(self) -> None:
        if self._bitmap is not None:
            call.bitmap_destroy(self._bitmap)
            self._bitmap, self._buffer = None, 0

    def flat_color(self, box: Box) -> Rgba | None:
        """The one colour the image shows under ``box`` (page space), or None for a picture (or
        for an image that could not be read, or a box that is not over it)."""
        region = self._region(box)
        if not self._buffer or region is None:
            return None
        left, top, right, bottom = region
        columns = [x * self.depth for x in _spread(left, right)]
        # Each sampled row's values in one C call per channel: PDFium stores B, G, R, and a gray
        # pixel is one byte that stands for all three.
        offsets = (
            [columns] if self.depth == 1 else [[x + 2 for x in columns], [x + 1 for x in columns], columns]
        )
        pickers = [itemgetter(*channel) if len(channel) > 1 else _one(channel[0]) for channel in offsets]
        values: list[list[int]] = [[] for _ in pickers]
        for y in _spread(top, bottom):
            row = ctypes.string_at(self._buffer + y * self.stride, self.stride)
            for picked, pick in zip(values, pickers, strict=True):
                picked.extend(pick(row))
            if any(max(picked) - min(picked) > NEAR_WHITE for picked in values):
                return None  # it varies under the text: a picture
        count = len(values[0])
        r, g, b = (round(sum(picked) / count) for picked in (values * 3)[:3])
        return (r, g, b, 255)

    def _region(self, box: Box) -> tuple[int, int, int, int] | None:
        """The image's pixel rectangle (left, top, right, bottom; inclusive) under ``box``."""
        if self._inverse is None:
            return None
        corners = [(box.left, box.bottom), (box.left, box.top), (box.right, box.bottom), (box.right, box.top)]
        a, b, c, d, e, f = self._inverse
        us = [a * x + c * y + e for x, y in corners]
        vs = [b * x + d * y + f for x, y in corners]
        # The image fills the unit square; its first row of pixels is at the top (v = 1).
        u0, u1 = max(0.0, min(us)), min(1.0, max(us))
        v0, v1 = max(0.0, min(vs)), min(1.0, max(vs))
        if u0 > u1 or v0 > v1:
            return None
        last_x, last_y = self.width - 1, self.height - 1
        left = min(last_x, math.floor(u0 * self.width))
        right = min(last_x, max(left, math.ceil(u1 * self.width) - 1))
        top = min(last_y, math.floor((1 - v1) * self.height))
        bottom = min(last_y, max(top, math.ceil((1 - v0) * self.height) - 1))
        return left, top, right, bottom


def _one(offset: int) -> Callable[[bytes], tuple[int]]:
    return lambda row: (row[offset],)


def _spread(first: int, last: int) -> range | list[int]:
    """Up to ``SAMPLES`` positions from ``first`` to ``last``, both included, evenly spread."""
    if last - first < SAMPLES:
        return range(first, last + 1)
    step = (last - first) / (SAMPLES - 1)
    return sorted({first + round(i * step) for i in range(SAMPLES)})


def _inverse(m: Matrix) -> Matrix | None:
    """The matrix taking page space back into the image's unit square, or None if it is flat."""
    a, b, c, d, e, f = m
    det = a * d - b * c
    if not math.isfinite(det) or abs(det) < 1e-12:
        return None
    ia, ib, ic, id_ = d / det, -b / det, -c / det, a / det
    return (ia, ib, ic, id_, -(e * ia + f * ic), -(e * ib + f * id_))
