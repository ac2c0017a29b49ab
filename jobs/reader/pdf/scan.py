"""One walk over a PDF page's objects (into forms), judging each text object once by the rules of
``visibility``: which text objects are hidden, and which straddle the page's edge.

It runs for every object of every page, so it is written for cost. The reader walks in C
(``_walk.c``, bound in ``native``): one call per page settles every text object the rules would
find seen without reading an image's pixels, and hands back the rest with the page's paints. Only
that rest is judged here, in full (``judge``). ``_walk`` is the same walk in Python, with a
narrower fast path (plainly seen text: filled, opaque, dark enough, on the page, large enough, with
nothing drawn before it under its centre that could be its colour); it is the reference the C walk
is tested against, and reaches the same verdicts.
"""

from __future__ import annotations

import bisect
import ctypes
import math
from typing import Any, NamedTuple

import pypdfium2 as pdfium
import pypdfium2.raw as raw

from jobs.reader.pdf import bindings as call
from jobs.reader.pdf.native import walk as native_walk
from jobs.reader.pdf.pixels import Pixels
from jobs.reader.pdf.visibility import (
    BARE_PAGE,
    MIN_READABLE_PT,
    MIN_VISIBLE_ALPHA,
    NEAR_WHITE,
    PAGE_WHITE,
    STROKE_MODES,
    Beneath,
    Box,
    Hidden,
    TextLook,
    judge,
    over,
    placement,
)

# Form XObjects nest; a hostile file nests them thousands deep. Past this depth they are not opened.
MAX_FORM_DEPTH = 12
# Objects visited per page, forms counted; a page of a million glyph runs (or of empty forms) is
# read without judging the rest.
MAX_OBJECTS_PER_PAGE = 50_000
# Paints looked at beneath one text object: past this many the text is judged seen, so a page of
# thousands of shapes costs a bounded look per text, not one that grows with the page.
MAX_BENEATH = 64
WHITE_FLOOR = 255 - NEAR_WHITE
# Paints that could be beneath text are filed by the horizontal bands of the page they cover, so a
# text looks only at those in its centre's band: a page of many rules and many lines costs a look
# per nearby rule, not one per rule on the page.
BANDS = 32
Matrix = tuple[float, float, float, float, float, float]
Rgba = tuple[int, int, int, int]
_UNKNOWN_MODE = raw.FPDF_TEXTRENDERMODE_UNKNOWN  # what PDFium answers for an object that is not text
_TEXT, _IMAGE, _SHADING, _PATH, _FORM = (
    raw.FPDF_PAGEOBJ_TEXT,
    raw.FPDF_PAGEOBJ_IMAGE,
    raw.FPDF_PAGEOBJ_SHADING,
    raw.FPDF_PAGEOBJ_PATH,
    raw.FPDF_PAGEOBJ_FORM,
)
# A path that fills nothing is never beneath text: its box is not asked for.
_NO_BOX = Box(math.inf, math.inf, -math.inf, -math.inf)


class _Paint(NamedTuple):
    """Something drawn that is not text: what may lie beneath a text object, or carry its OCR."""

    order: int
    box: Box
    image: bool  # an image or a shading: what it shows is read from its pixels (a shading: a picture)
    color: Rgba | None  # a path's fill colour; None for a path that is not filled
    handle: Any = None  # an image's object, to read its pixels
    to_page: Matrix | None = None  # an image's matrix: its unit square to page space


class PageScan:
    """The page's hidden text objects (by address, with why) and those that straddle its edge."""

    def __init__(self, page: pdfium.PdfPage, *, native: bool = True) -> None:
        """``native``: walk the objects in C (``_walk.c``), as the reader does; False walks them in
        Python (``_walk``), the reference the C walk is tested against."""
        self.visible_box = _page_box(page)
        self.images = 0
        self.hidden: dict[int, Hidden] = {}
        self.straddling: set[int] = set()
        self._visited = 0  # objects visited, forms counted (at most MAX_OBJECTS_PER_PAGE)
        self._order = -1  # the last text or paint's place in painting order
        self._paints: list[_Paint] = []
        self._paint_orders: list[int] = []  # each paint's order, for bisect
        self._pictures: list[_Paint] = []  # the images and shadings among them
        self._pixels: dict[int, Pixels] = {}  # by paint order: each image decoded once per page
        self._undecided: list[tuple[int, Any, Matrix | None]] = []
        try:
            if native:
                self._walk_natively(page)
            else:
                self._out_values()
                # Per fill colour: the paints so far that could make text of that colour blend in,
                # by band, and how many of the page's paints have been looked at for it.
                self._blending: dict[Rgba, tuple[list[list[_Paint]], list[int]]] = {}
                height = self.visible_box.top - self.visible_box.bottom
                self._band_scale = BANDS / height if 0 < height < math.inf else 0.0
                self._walk(page.raw, call.count_objects(page.raw), None, None, 0)
            if self._undecided and native:
                self._out_values()
            for order, handle, form in self._undecided:
                self._judge(order, handle, form)
        finally:
            self.close()

    def _out_values(self) -> None:
        """Out-values for PDFium's calls from Python, made once per page with their pointers (a
        byref per call is a measurable part of a page's cost); most pages, settled in C, need none."""
        self._colors = (ctypes.c_uint * 4)()
        self._color_refs = tuple(ctypes.byref(self._colors, 4 * i) for i in range(4))
        self._floats = (ctypes.c_float * 7)()  # bounds or a matrix (a to f), then a font size
        self._float_refs = tuple(ctypes.byref(self._floats, 4 * i) for i in range(4))
        self._matrix_ref = ctypes.byref(self._floats)  # FS_MATRIX is six floats, a to f
        self._font_size_ref = ctypes.byref(self._floats, 24)
        self._draw_modes = (ctypes.c_int * 2)()
        self._draw_mode_refs = (ctypes.byref(self._draw_modes), ctypes.byref(self._draw_modes, 4))

    def close(self) -> None:
        """Free the images decoded for the page: every question about them has been answered."""
        for pixels in self._pixels.values():
            pixels.close()
        self._pixels.clear()

    # The walk ---------------------------------------------------------------------------------

    def _walk_natively(self, page: pdfium.PdfPage) -> None:
        """The walk in C: the text it leaves for the judgement (a part of what ``_walk`` leaves)
        and, when there is any, every paint of the page as ``_walk`` files them."""
        images, undecided, paints = native_walk(
            call.address(page.raw), self.visible_box, MAX_OBJECTS_PER_PAGE, MAX_FORM_DEPTH
        )
        self.images = images
        self._undecided = [(order, call.Handle(address), to_page) for order, address, to_page in undecided]
        for order, box, image, color, address, to_page in paints:
            paint = _Paint(order, Box(*box), image, color, call.Handle(address) if address else None, to_page)
            self._paints.append(paint)
            self._paint_orders.append(order)
            if image:
                self._pictures.append(paint)

    def _walk(self, parent: Any, count: int, form: Any, to_page: Matrix | None, depth: int) -> None:
        """The objects of the page (``form`` None) or of a form, in painting order.

        Text in render mode 0 is settled here when it is plainly seen, from four more facts and
        no TextLook: opaque and not near white, wholly on the page, large enough, and with nothing
        drawn before it under its centre that could be its colour (an image, a translucent fill, a
        fill within NEAR_WHITE of it). Whatever this cannot settle goes to ``judge``, which decides
        it exactly; what it settles, ``judge`` would find seen too. Written out in one loop, with
        PDFium's calls and out-values in locals: it runs for every object of every page, and a
        method call or an attribute look-up per object is a measurable part of a page's cost.
        """
        undecided, paints, paint_orders, blending = (
            self._undecided,
            self._paints,
            self._paint_orders,
            self._blending,
        )
        render_mode, get_object, object_type = call.render_mode, call.get_object, call.object_type
        fill_color, bounds, font_size, matrix = call.fill_color, call.bounds, call.font_size, call.matrix
        colors, (c0, c1, c2, c3) = self._colors, self._color_refs
        floats, (f0, f1, f2, f3), matrix_ref = self._floats, self._float_refs, self._matrix_ref
        size_ref = self._font_size_ref
        draw_mode, draw_modes, (fill_mode_ref, stroke_ref) = (
            call.draw_mode,
            self._draw_modes,
            self._draw_mode_refs,
        )
        page_left, page_bottom, page_right, page_top = self.visible_box
        band_scale = self._band_scale
        form_scale = (
            1.0 if to_page is None else math.sqrt(abs(to_page[0] * to_page[3] - to_page[1] * to_page[2]))
        )
        for index in range(count):
            if self._visited >= MAX_OBJECTS_PER_PAGE:
                return
            self._visited += 1
            handle = (
                get_object(parent, index)
                if form is None
                else call.get_form_object(form, ctypes.c_ulong(index))
            )
            if not handle:
                continue
            mode = render_mode(handle)
            if mode == _UNKNOWN_MODE:  # not text: only text objects have a render mode
                kind = object_type(handle)
                if kind == _FORM:
                    self._open_form(handle, to_page, depth)
                elif kind == _PATH:  # the common paint, written out too
                    order = self._order = self._order + 1
                    draw_mode(handle, fill_mode_ref, stroke_ref)
                    if not draw_modes[0]:  # fills nothing: never beneath text, so no box
                        paints.append(_Paint(order, _NO_BOX, False, None))
                    else:
                        filled = tuple(colors[:]) if fill_color(handle, c0, c1, c2, c3) else (0, 0, 0, 255)
                        bounds(handle, f0, f1, f2, f3)
                        box = Box(*floats[:4]) if to_page is None else _transform(Box(*floats[:4]), to_page)
                        paints.append(_Paint(order, box, False, filled))  # type: ignore[arg-type]
                    paint_orders.append(order)
                elif kind in (_IMAGE, _SHADING):
                    order = self._order = self._order + 1
                    paints.append(self._paint(order, kind, handle, to_page))
                    paint_orders.append(order)
                    self._pictures.append(paints[-1])
                    self.images += kind == _IMAGE
                elif kind == _TEXT:  # text PDFium knows no render mode for: judged in full
                    order = self._order = self._order + 1
                    undecided.append((order, handle, to_page))
                continue
            order = self._order = self._order + 1
            if mode != 0 or not fill_color(handle, c0, c1, c2, c3):
                undecided.append((order, handle, to_page))
                continue
            r, g, b, alpha = colors[:]  # a slice: iterating a ctypes array costs five times as much
            if alpha != 255 or (r >= WHITE_FLOOR and g >= WHITE_FLOOR and b >= WHITE_FLOOR):
                undecided.append((order, handle, to_page))
                continue
            bounds(handle, f0, f1, f2, f3)
            x0, y0, x1, y1 = floats[:4]
            if to_page is not None:
                x0, y0, x1, y1 = _transform(Box(x0, y0, x1, y1), to_page)
            if not (page_left <= x0 and x1 <= page_right and page_bottom <= y0 and y1 <= page_top):
                undecided.append((order, handle, to_page))
                continue
            font_size(handle, size_ref)
            matrix(handle, matrix_ref)
            m_a, m_b, m_c, m_d, _, _, size = floats[:]
            if size * math.sqrt(abs(m_a * m_d - m_b * m_c)) * form_scale < MIN_READABLE_PT:
                undecided.append((order, handle, to_page))
                continue
            # What could make text of this colour blend in: the paints so far (all drawn before
            # it), each looked at once per fill colour however many texts of that colour follow,
            # and filed by the bands of the page's height they cover.
            fill = (r, g, b, 255)
            entry = blending.get(fill)
            if entry is None:
                entry = blending[fill] = ([[] for _ in range(BANDS)], [0])
            bands, looked = entry
            if looked[0] < len(paints):
                # A paint beneath opaque text could make it the colour of its background when
                # it is an image or shading (its pixels may be that colour), a translucent fill
                # (what it composes to), or an opaque fill within NEAR_WHITE of the text's colour.
                for paint in paints[looked[0] :]:
                    color = paint.color
                    if paint.image or (
                        color is not None
                        and (
                            MIN_VISIBLE_ALPHA <= color[3] < 255
                            or (
                                color[3] == 255
                                and -NEAR_WHITE <= color[0] - r <= NEAR_WHITE
                                and -NEAR_WHITE <= color[1] - g <= NEAR_WHITE
                                and -NEAR_WHITE <= color[2] - b <= NEAR_WHITE
                            )
                        )
                    ):
                        for band in self._bands(paint.box):
                            bands[band].append(paint)
                looked[0] = len(paints)
            x, y = (x0 + x1) / 2, (y0 + y1) / 2
            for paint in bands[min(BANDS - 1, int((y - page_bottom) * band_scale)) if band_scale else 0]:
                left, bottom, right, top = paint.box
                if left <= x <= right and bottom <= y <= top:
                    undecided.append((order, handle, to_page))
                    break

    def _bands(self, box: Box) -> range:
        """The bands of the page's height that ``box`` covers (none for a box with no extent the
        page's text could lie in, such as one of NaN coordinates: it contains no point)."""
        scale = self._band_scale
        if not scale:
            return range(1)  # a page of no height (or an unbounded one): one band
        low = (box.bottom - self.visible_box.bottom) * scale
        high = (box.top - self.visible_box.bottom) * scale
        if not (low <= high and high >= 0 and low < BANDS):
            return range(0)
        return range(0 if low < 0 else int(low), BANDS if high >= BANDS else int(high) + 1)

    def _open_form(self, form: Any, to_page: Matrix | None, depth: int) -> None:
        """A form's objects in place (forms nest at most MAX_FORM_DEPTH deep)."""
        if depth >= MAX_FORM_DEPTH or not call.matrix(form, self._matrix_ref):
            return
        own: Matrix = tuple(self._floats[:6])  # type: ignore[assignment]
        inner = own if to_page is None else _compose(own, to_page)
        self._walk(None, call.count_form_objects(form), form, inner, depth + 1)

    def _paint(self, order: int, kind: int, handle: Any, form: Matrix | None) -> _Paint:
        """An image or a shading (paths are made in the walk)."""
        box = self._box(handle, form)
        if kind == _IMAGE and call.matrix(handle, self._matrix_ref):
            own: Matrix = tuple(self._floats[:6])  # type: ignore[assignment]
            return _Paint(order, box, True, None, handle, own if form is None else _compose(own, form))
        return _Paint(order, box, image=True, color=None)  # a shading (or an image with no matrix): a picture

    # The full judgement -----------------------------------------------------------------------

    def _judge(self, order: int, handle: Any, form: Matrix | None) -> None:
        look = self._look(handle, form)
        verdict = judge(
            look,
            self.visible_box,
            image_shows=lambda: self._image_shows(look.box),
            beneath=lambda: self._beneath(order, look.box),
        )
        if verdict is not None:
            self.hidden[call.address(handle)] = verdict
        elif placement(look.box, self.visible_box) is None:
            self.straddling.add(call.address(handle))

    def _look(self, handle: Any, form: Matrix | None) -> TextLook:
        mode = call.render_mode(handle)
        fill = self._color(call.fill_color, handle)
        # Most text is filled, not stroked: the stroke colour is asked for only when it is painted.
        stroke = self._color(call.stroke_color, handle) if mode in STROKE_MODES else fill
        return TextLook(self._box(handle, form), mode, fill, stroke, self._size(handle, form))

    def _size(self, handle: Any, form: Matrix | None) -> float:
        """The effective size: the font size times every scale applied to it."""
        floats = self._floats
        floats[6] = 0.0
        call.font_size(handle, self._font_size_ref)
        a, b, c, d, _, _, size = floats[:] if call.matrix(handle, self._matrix_ref) else (0.0,) * 7
        scale = math.sqrt(abs(a * d - b * c))
        if form is not None:
            scale *= math.sqrt(abs(form[0] * form[3] - form[1] * form[2]))
        return size * scale

    def _image_shows(self, box: Box) -> bool:
        """Whether an image over or under the box shows something there (its pixels vary)."""
        return any(p.box.overlaps(box) and self._flat(p, box) is None for p in self._pictures)

    def _beneath(self, order: int, box: Box) -> Beneath:
        """What lies under the box's centre: the paints drawn before the text, topmost first down
        to the first opaque one, composed over the white page."""
        x, y = box.center
        layers: list[Rgba] = []
        # Paints are in painting order: those drawn before the text end where its order would go.
        before = bisect.bisect_left(self._paint_orders, order)
        for looked, paint in enumerate(reversed(self._paints[max(0, before - MAX_BENEATH - 1) : before])):
            if looked >= MAX_BENEATH:
                return Beneath(None, drawn=True)  # too much beneath to judge: counted as seen
            left, bottom, right, top = paint.box
            if not (left <= x <= right and bottom <= y <= top):
                continue
            if paint.image:
                flat = self._flat(paint, box)
                if flat is None:
                    return Beneath(None, drawn=True)  # a picture: any text on it may be seen
                layers.append(flat)
                break
            if paint.color is not None and paint.color[3] >= MIN_VISIBLE_ALPHA:
                layers.append(paint.color)
                if paint.color[3] == 255:
                    break
        if not layers:
            return BARE_PAGE
        color = PAGE_WHITE
        for layer in reversed(layers):
            color = over(color, layer)
        return Beneath(color, drawn=True)

    def _flat(self, paint: _Paint, box: Box) -> Rgba | None:
        """The one colour an image shows under the box, or None (a picture, a shading, unreadable)."""
        if paint.handle is None or paint.to_page is None:
            return None
        pixels = self._pixels.get(paint.order)
        if pixels is None:
            pixels = self._pixels[paint.order] = Pixels(paint.handle, paint.to_page)
        return pixels.flat_color(box)

    def _color(self, getter: Any, handle: Any) -> Rgba:
        if not getter(handle, *self._color_refs):
            return (0, 0, 0, 255)
        return tuple(self._colors[:])  # type: ignore[return-value]

    def _box(self, handle: Any, form: Matrix | None) -> Box:
        floats = self._floats
        call.bounds(handle, *self._float_refs)
        box = Box(*floats[:4])
        return box if form is None else _transform(box, form)


def _page_box(page: pdfium.PdfPage) -> Box:
    """The visible page: the media box clipped to the crop box, as PDFium reports it."""
    rect = raw.FS_RECTF()
    if raw.FPDF_GetPageBoundingBox(page.raw, ctypes.byref(rect)):
        return Box(
            min(rect.left, rect.right),
            min(rect.bottom, rect.top),
            max(rect.left, rect.right),
            max(rect.bottom, rect.top),
        )
    return Box(*page.get_bbox())


def _compose(inner: Matrix, outer: Matrix) -> Matrix:
    """The matrix that applies ``inner`` and then ``outer`` (PDF row-vector convention)."""
    a, b, c, d, e, f = inner
    a2, b2, c2, d2, e2, f2 = outer
    return (
        a * a2 + b * c2,
        a * b2 + b * d2,
        c * a2 + d * c2,
        c * b2 + d * d2,
        e * a2 + f * c2 + e2,
        e * b2 + f * d2 + f2,
    )


def _transform(box: Box, m: Matrix) -> Box:
    corners = [(box.left, box.bottom), (box.left, box.top), (box.right, box.bottom), (box.right, box.top)]
    xs = [m[0] * x + m[2] * y + m[4] for x, y in corners]
    ys = [m[1] * x + m[3] * y + m[5] for x, y in corners]
    return Box(min(xs), min(ys), max(xs), max(ys))
