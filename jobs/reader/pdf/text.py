"""A PDF's bytes to the text its reader sees, page by page, with PDFium (through pypdfium2).

This runs inside a PDF child process (``jobs.reader.pdf.child``), never in the worker: PDFium is C
code fed hostile bytes, and it inflates streams whole. Pages are read in order until the text
reaches the character cap (pages after it are not even loaded) or the CPU budget is spent; text a
reader would not see is dropped by the rules in ``pdf_visibility`` and counted.

Most pages hide nothing, and cost one call for their text. Only a page with a hidden or
half-off-page text object is read character by character.
"""

from __future__ import annotations

import bisect
import ctypes
import math
import re
import time
from typing import TYPE_CHECKING, Any, NamedTuple

import pypdfium2 as pdfium
import pypdfium2.raw as raw

from jobs.reader.hidden import strip_invisible
from jobs.reader.metadata.xmp import declared
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
from jobs.reader.pdf.wire import PdfRefused, Reading, Refusal

MAX_TITLE = 1000
MAX_URIS_PER_PAGE = 1000
MAX_URIS = 5000  # the worker keeps at most 500 links; the rest are duplicates, http, or junk
# Characters sent past the cap: room for the worker's cut to back off a combining mark, and for a
# URL that straddles the cap to be read whole.
CUT_SLACK = 2048
MAX_URI_BYTES = 8192
# Form XObjects nest; a hostile file nests them thousands deep. Past this depth they are not opened.
MAX_FORM_DEPTH = 12
# Objects judged per page; a page of a million glyph runs is read without judging the rest.
MAX_OBJECTS_PER_PAGE = 50_000
# Paints looked at beneath one text object: past this many the text is judged seen, so a page of
# thousands of shapes costs a bounded look per text, not one that grows with the page.
MAX_BENEATH = 64

_LINE_BREAKS = re.compile(r"\n{2,}")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")
Matrix = tuple[float, float, float, float, float, float]

if TYPE_CHECKING:  # the OCR engine loads only in the child that reads a scan, not with the text reader
    from jobs.reader.ocr.run import OcrRun


def extract(
    body: bytes, *, max_chars: int, cpu_budget_s: float, ocr: OcrRun | None = None, from_page: int = 0
) -> Reading:
    """Read ``body`` until ``max_chars`` characters of text or ``cpu_budget_s`` of CPU time (OCR's
    time aside: ``ocr`` has its own budget), from page ``from_page`` (0: the first)."""
    started = time.process_time()
    document = _open(body)
    try:
        count = len(document)
        reading = Reading(
            pages=count, pages_read=0, title=_title(document), declared=declared(document, body)
        )
        length = uri_count = 0
        # Pages before ``from_page`` were read by an earlier request: their places are kept empty.
        reading.pages_read = min(from_page, count)
        reading.texts.extend([""] * reading.pages_read)
        reading.uris.extend([] for _ in range(reading.pages_read))
        for index in range(min(from_page, count), count):
            spent = time.process_time() - started - (ocr.spent_s if ocr is not None else 0.0)
            if spent > cpu_budget_s:
                reading.complete = False
                break
            page = _load(document, index)
            if page is None:
                reading.pages_read += 1
                reading.unreadable_pages += 1
                reading.texts.append("")
                reading.uris.append([])
                continue
            try:
                text, uris, scanned = _read_page(document, page, reading)
                if scanned and ocr is not None:
                    found = ocr.read_page(page, index + 1, reading)
                    if found is None:
                        # Past the OCR budget: the reading stops here, so a later one continues it.
                        reading.ocr_unread.append(index + 1)
                        break
                    text, invisible = strip_invisible(clean(found))
                    reading.hidden_removed += invisible
            finally:
                page.close()
            reading.pages_read += 1
            # The worker cuts the text at max_chars; what lies well past it need not cross the pipe.
            text = text[: max(0, max_chars + CUT_SLACK - length)]
            uris = uris[: max(0, MAX_URIS - uri_count)]
            uri_count += len(uris)
            reading.texts.append(text)
            reading.uris.append(uris)
            if text:
                length += len(text) + 2
            if length >= max_chars:
                break
        if count and reading.unreadable_pages and reading.unreadable_pages == reading.pages_read:
            raise PdfRefused(Refusal.DAMAGED)
        return reading
    finally:
        document.close()


def _open(body: bytes) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(body)
    except pdfium.PdfiumError as error:
        if error.err_code == raw.FPDF_ERR_SUCCESS:
            # PDFium opened it and found no page: an empty document, read as empty.
            return pdfium.PdfDocument.new()
        if error.err_code == raw.FPDF_ERR_PASSWORD:
            raise PdfRefused(Refusal.PASSWORD) from None
        if error.err_code == raw.FPDF_ERR_SECURITY:
            raise PdfRefused(Refusal.SECURITY) from None
        raise PdfRefused(Refusal.DAMAGED) from None


def _load(document: pdfium.PdfDocument, index: int) -> pdfium.PdfPage | None:
    try:
        return document[index]
    except pdfium.PdfiumError:
        return None


def _title(document: pdfium.PdfDocument) -> str:
    title, _ = strip_invisible(document.get_metadata_value("Title"))
    return " ".join(title.split())[:MAX_TITLE]


def clean(text: str) -> str:
    """PDFium's page text with ordinary line ends, no trailing spaces and no blank lines: PDFium
    writes none itself, so one left where hidden text was dropped would only mark the gap (and a
    blank line is what separates pages)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _TRAILING_SPACE.sub("\n", text)
    return _LINE_BREAKS.sub("\n", text).strip()


def _read_page(
    document: pdfium.PdfDocument, page: pdfium.PdfPage, reading: Reading
) -> tuple[str, list[str], bool]:
    """The page's visible text, its link URIs, and whether it is a scan (images, no text layer)."""
    textpage = page.get_textpage()
    try:
        scan = _PageScan(page)
        reading.images += scan.images
        count = raw.FPDFText_CountChars(textpage.raw)
        reading.characters += max(count, 0)
        scanned = count <= 0 and scan.images > 0
        if count <= 0:
            text = ""
        elif not scan.hidden and not scan.straddling:
            text = textpage.get_text_range(0, count)
        else:
            text, dropped = _visible_text(textpage, count, scan)
            reading.hidden_removed += dropped
    finally:
        textpage.close()
    text, invisible = strip_invisible(clean(text))
    reading.hidden_removed += invisible
    return text, _uris(document, page), scanned


def _visible_text(textpage: pdfium.PdfTextPage, count: int, scan: _PageScan) -> tuple[str, int]:
    """The page's text without the characters of hidden objects, and how many were dropped."""
    runs: list[tuple[int, int]] = []
    dropped = 0
    start = None
    for index in range(count):
        if scan.keeps(textpage, index):
            if start is None:
                start = index
            continue
        dropped += 1
        if start is not None:
            runs.append((start, index - start))
            start = None
    if start is not None:
        runs.append((start, count - start))
    text = ""
    for first, length in runs:
        piece = textpage.get_text_range(first, length)
        # Dropped text usually sits between the spaces PDFium generated around it; when it does
        # not, a space keeps the words on either side apart.
        if text and piece and not text[-1].isspace() and not piece[0].isspace():
            text += " "
        text += piece
    return text, dropped


def _uris(document: pdfium.PdfDocument, page: pdfium.PdfPage) -> list[str]:
    """The URIs of the page's link annotations, in annotation order (other actions are skipped)."""
    found: list[str] = []
    if raw.FPDFPage_GetAnnotCount(page.raw) <= 0:
        return found  # no annotation, so no link: most pages of most documents
    position = ctypes.c_int(0)
    link = raw.FPDF_LINK()
    position_ref, link_ref = ctypes.byref(position), ctypes.byref(link)
    # One buffer for every URI of the page: PDFium writes a URI into it only when it fits, and
    # says its size either way, so one call reads a URI that fits and skips one that does not.
    buffer = _URI_BUFFER
    while len(found) < MAX_URIS_PER_PAGE and raw.FPDFLink_Enumerate(page.raw, position_ref, link_ref):
        action = raw.FPDFLink_GetAction(link)
        if not action or raw.FPDFAction_GetType(action) != raw.PDFACTION_URI:
            continue
        size = raw.FPDFAction_GetURIPath(document.raw, action, buffer, MAX_URI_BYTES)
        if not 1 < size <= MAX_URI_BYTES:
            continue
        # The URI is 7-bit ASCII by the standard; anything else is read byte for byte.
        found.append(buffer.raw[: size - 1].decode("latin-1"))
    return found


_URI_BUFFER = ctypes.create_string_buffer(MAX_URI_BYTES)
# PDFium's calls that run for every text object of every page, bound once.
_render_mode = raw.FPDFTextObj_GetTextRenderMode
_fill_color = raw.FPDFPageObj_GetFillColor
_bounds = raw.FPDFPageObj_GetBounds
_font_size = raw.FPDFTextObj_GetFontSize
_matrix = raw.FPDFPageObj_GetMatrix
WHITE_FLOOR = 255 - NEAR_WHITE


class _Paint(NamedTuple):
    """Something drawn that is not text: what may lie beneath a text object, or carry its OCR."""

    order: int
    box: Box
    image: bool  # an image or a shading: what it shows is read from its pixels (a shading: a picture)
    color: tuple[int, int, int, int] | None  # a path's fill colour; None for a path that is not filled
    handle: Any = None  # an image's object, to read its pixels
    to_page: Matrix | None = None  # an image's matrix: its unit square to page space


class _PageScan:
    """One walk over a page's objects (into forms), judging each text object once."""

    def __init__(self, page: pdfium.PdfPage) -> None:
        self.visible_box = _page_box(page)
        self.images = 0
        self.hidden: dict[int, Hidden] = {}
        self.straddling: set[int] = set()
        self._paints: list[_Paint] = []
        self._floats = [ctypes.c_float() for _ in range(4)]
        self._colors = [ctypes.c_uint() for _ in range(4)]
        self._matrix = raw.FS_MATRIX()
        # Made once per page: a byref per call is a measurable part of a page's cost.
        self._float_refs = [ctypes.byref(value) for value in self._floats]
        self._color_refs = [ctypes.byref(value) for value in self._colors]
        self._matrix_ref = ctypes.byref(self._matrix)
        self._draw_mode = [ctypes.c_int(), ctypes.c_int()]  # fill mode, stroke
        self._draw_mode_refs = [ctypes.byref(value) for value in self._draw_mode]
        self._blending: dict[tuple[int, int, int, int], list[_Paint]] = {}
        self._doubles = [ctypes.c_double() for _ in range(4)]
        self._pixels: dict[int, Pixels] = {}  # by paint order: each image decoded once per page
        texts: list[tuple[int, Any, Matrix | None]] = []
        text_kind, image_kind = raw.FPDF_PAGEOBJ_TEXT, raw.FPDF_PAGEOBJ_IMAGE
        painted = (image_kind, raw.FPDF_PAGEOBJ_SHADING, raw.FPDF_PAGEOBJ_PATH)
        for order, (kind, handle, form) in enumerate(_objects(page)):
            if kind == text_kind:
                texts.append((order, handle, form))
            elif kind in painted:
                self._paints.append(self._paint(order, kind, handle, form))
                self.images += kind == image_kind
        plainly_seen = self._plainly_seen
        for order, handle, form in texts:
            if not plainly_seen(order, handle, form):
                self._judge(order, handle, form)

    def keeps(self, textpage: pdfium.PdfTextPage, index: int) -> bool:
        handle = raw.FPDFText_GetTextObject(textpage.raw, index)
        if not handle:
            return True  # a space or line break PDFium generated between words and lines
        address = _address(handle)
        if address in self.hidden:
            return False
        if address not in self.straddling:
            return True
        left, right, bottom, top = self._doubles
        raw.FPDFText_GetCharBox(
            textpage.raw,
            index,
            ctypes.byref(left),
            ctypes.byref(right),
            ctypes.byref(bottom),
            ctypes.byref(top),
        )
        return self.visible_box.contains((left.value + right.value) / 2, (bottom.value + top.value) / 2)

    def _judge(self, order: int, handle: Any, form: Matrix | None) -> None:
        look = self._look(handle, form)
        verdict = judge(
            look,
            self.visible_box,
            image_shows=lambda: self._image_shows(look.box),
            beneath=lambda: self._beneath(order, look.box),
        )
        if verdict is not None:
            self.hidden[_address(handle)] = verdict
        elif placement(look.box, self.visible_box) is None:
            self.straddling.add(_address(handle))

    def _plainly_seen(self, order: int, handle: Any, form: Matrix | None) -> bool:
        """The common case, decided from five facts and no TextLook: filled (mode 0), opaque, not
        near white, wholly on the page, large enough, and with nothing drawn before it under its
        centre that could be its colour (an image, a translucent fill, a fill within NEAR_WHITE of
        it). Whatever this cannot settle goes to ``judge``, which decides it exactly as before;
        what it settles, ``judge`` would find seen too. Most pages' text is all settled here.
        (Written out in one function: it runs for every text object of every page.)"""
        if _render_mode(handle) != 0:
            return False
        r, g, b, a = self._colors
        if not _fill_color(handle, *self._color_refs):
            return False
        fill = (r.value, g.value, b.value, a.value)
        if fill[3] != 255 or min(fill[0], fill[1], fill[2]) >= WHITE_FLOOR:
            return False
        left, bottom, right, top = self._floats
        _bounds(handle, *self._float_refs)
        if form is None:
            x0, y0, x1, y1 = left.value, bottom.value, right.value, top.value
        else:
            x0, y0, x1, y1 = _transform(Box(left.value, bottom.value, right.value, top.value), form)
        page = self.visible_box
        if not (page.left <= x0 and x1 <= page.right and page.bottom <= y0 and y1 <= page.top):
            return False
        font_size = self._floats[0]
        _font_size(handle, self._float_refs[0])
        _matrix(handle, self._matrix_ref)
        m = self._matrix
        scale = math.sqrt(abs(m.a * m.d - m.b * m.c))
        if form is not None:
            scale *= math.sqrt(abs(form[0] * form[3] - form[1] * form[2]))
        if font_size.value * scale < MIN_READABLE_PT:
            return False
        candidates = self._blending.get(fill)
        if candidates is None:
            candidates = self._blending[fill] = [p for p in self._paints if _may_blend(p, fill)]
        if not candidates:
            return True
        x, y = (x0 + x1) / 2, (y0 + y1) / 2
        for paint in candidates:
            under = paint.box
            if paint.order < order and under.left <= x <= under.right and under.bottom <= y <= under.top:
                return False
        return True

    def _size(self, handle: Any, form: Matrix | None) -> float:
        """The effective size: the font size times every scale applied to it."""
        font_size = self._floats[0]
        raw.FPDFTextObj_GetFontSize(handle, self._float_refs[0])
        size = font_size.value
        raw.FPDFPageObj_GetMatrix(handle, self._matrix_ref)
        m = self._matrix
        scale = math.sqrt(abs(m.a * m.d - m.b * m.c))
        if form is not None:
            scale *= math.sqrt(abs(form[0] * form[3] - form[1] * form[2]))
        return size * scale

    def _look(self, handle: Any, form: Matrix | None) -> TextLook:
        mode = raw.FPDFTextObj_GetTextRenderMode(handle)
        fill = self._color(raw.FPDFPageObj_GetFillColor, handle)
        # Most text is filled, not stroked: the stroke colour is asked for only when it is painted.
        stroke = self._color(raw.FPDFPageObj_GetStrokeColor, handle) if mode in STROKE_MODES else fill
        return TextLook(self._box(handle, form), mode, fill, stroke, self._size(handle, form))

    def _paint(self, order: int, kind: int, handle: Any, form: Matrix | None) -> _Paint:
        box = self._box(handle, form)
        if kind == raw.FPDF_PAGEOBJ_IMAGE and raw.FPDFPageObj_GetMatrix(handle, ctypes.byref(self._matrix)):
            m = self._matrix
            own = (m.a, m.b, m.c, m.d, m.e, m.f)
            return _Paint(order, box, True, None, handle, own if form is None else _compose(own, form))
        if kind != raw.FPDF_PAGEOBJ_PATH:
            return _Paint(order, box, image=True, color=None)  # a shading: a picture
        raw.FPDFPath_GetDrawMode(handle, *self._draw_mode_refs)
        color = self._color(raw.FPDFPageObj_GetFillColor, handle) if self._draw_mode[0].value else None
        return _Paint(order, box, image=False, color=color)

    def _image_shows(self, box: Box) -> bool:
        """Whether an image over or under the box shows something there (its pixels vary)."""
        return any(p.image and p.box.overlaps(box) and self._flat(p, box) is None for p in self._paints)

    def _beneath(self, order: int, box: Box) -> Beneath:
        """What lies under the box's centre: the paints drawn before the text, topmost first down
        to the first opaque one, composed over the white page."""
        x, y = box.center
        layers: list[tuple[int, int, int, int]] = []
        # Paints are in painting order: those drawn before the text end where its order would go.
        before = bisect.bisect_left(self._paints, order, key=lambda paint: paint.order)
        for looked, index in enumerate(range(before - 1, -1, -1)):
            if looked >= MAX_BENEATH:
                return Beneath(None, drawn=True)  # too much beneath to judge: counted as seen
            paint = self._paints[index]
            if not paint.box.contains(x, y):
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

    def _flat(self, paint: _Paint, box: Box) -> tuple[int, int, int, int] | None:
        """The one colour an image shows under the box, or None (a picture, a shading, unreadable)."""
        if paint.handle is None or paint.to_page is None:
            return None
        pixels = self._pixels.get(paint.order)
        if pixels is None:
            pixels = self._pixels[paint.order] = Pixels(paint.handle, paint.to_page)
        return pixels.flat_color(box)

    def _color(self, getter: Any, handle: Any) -> tuple[int, int, int, int]:
        r, g, b, a = self._colors
        if not getter(handle, *self._color_refs):
            return (0, 0, 0, 255)
        return (r.value, g.value, b.value, a.value)

    def _box(self, handle: Any, form: Matrix | None) -> Box:
        left, bottom, right, top = self._floats
        raw.FPDFPageObj_GetBounds(handle, *self._float_refs)
        box = Box(left.value, bottom.value, right.value, top.value)
        return box if form is None else _transform(box, form)


def _objects(page: pdfium.PdfPage) -> list[tuple[int, Any, Matrix | None]]:
    """Every object on the page in painting order, forms opened in place, with the matrix that
    takes a form's contents to page space (None at the top level). At most MAX_OBJECTS_PER_PAGE
    are visited, forms counted: a page of a million empty forms costs no more than one of text."""
    found: list[tuple[int, Any, Matrix | None]] = []
    visited = [0]
    get_object, get_type, form_kind = raw.FPDFPage_GetObject, raw.FPDFPageObj_GetType, raw.FPDF_PAGEOBJ_FORM
    for index in range(raw.FPDFPage_CountObjects(page.raw)):
        if visited[0] >= MAX_OBJECTS_PER_PAGE:
            break
        visited[0] += 1
        handle = get_object(page.raw, index)
        if not handle:
            continue
        kind = get_type(handle)
        if kind == form_kind:
            _form_objects(handle, None, 0, found, visited)
        else:
            found.append((kind, handle, None))
    return found


def _form_objects(
    form: Any,
    to_page: Matrix | None,
    depth: int,
    found: list[tuple[int, Any, Matrix | None]],
    visited: list[int],
) -> None:
    """A form's objects, in painting order, into ``found`` (forms nest at most MAX_FORM_DEPTH)."""
    matrix = raw.FS_MATRIX()
    if depth >= MAX_FORM_DEPTH or not raw.FPDFPageObj_GetMatrix(form, ctypes.byref(matrix)):
        return
    own = (matrix.a, matrix.b, matrix.c, matrix.d, matrix.e, matrix.f)
    inner = own if to_page is None else _compose(own, to_page)
    for index in range(raw.FPDFFormObj_CountObjects(form)):
        if visited[0] >= MAX_OBJECTS_PER_PAGE:
            return
        visited[0] += 1
        handle = raw.FPDFFormObj_GetObject(form, index)
        if not handle:
            continue
        kind = raw.FPDFPageObj_GetType(handle)
        if kind == raw.FPDF_PAGEOBJ_FORM:
            _form_objects(handle, inner, depth + 1, found, visited)
        else:
            found.append((kind, handle, inner))


def _may_blend(paint: _Paint, fill: tuple[int, int, int, int]) -> bool:
    """Whether ``paint``, beneath opaque text of colour ``fill``, could make it the colour of its
    background: an image or shading (its pixels may be that colour), a translucent fill (what it
    composes to), or an opaque fill within NEAR_WHITE of it. A path not filled is never beneath."""
    if paint.image:
        return True
    color = paint.color
    if color is None:
        return False
    if color[3] != 255:
        return color[3] >= MIN_VISIBLE_ALPHA
    return max(abs(color[0] - fill[0]), abs(color[1] - fill[1]), abs(color[2] - fill[2])) <= NEAR_WHITE


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


def _address(handle: Any) -> int:
    return int(ctypes.cast(handle, ctypes.c_void_p).value or 0)
