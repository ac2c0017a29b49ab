"""The pictures OCR reads: an image fetched directly, or a PDF page rendered by PDFium.

Both are bounded in pixels before any are decoded: an image's size is read from its header (Pillow
opens a file by its header alone, and decodes only on ``load``), so a PNG that declares 50,000 x
50,000 pixels is refused having cost a few bytes; a PDF page is rendered at a resolution scaled
down until it fits the bound. Pictures are handed to Tesseract in 8-bit grey, which is what it
binarises from anyway, at a quarter of the memory of colour.
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import pypdfium2 as pdfium
from PIL import Image, ImageDraw, ImageSequence

# Forty megapixels: a letter page scanned at 600 dpi is 34. An image past it is refused unread.
MAX_PIXELS = 40_000_000
# The resolution PDF pages are rendered at for OCR: Tesseract reads body text best at 300 dpi.
RENDER_DPI = 300
POINTS_PER_INCH = 72
# The formats read as images (their Pillow names); the plugins are loaded before the child confines itself.
FORMATS = ("PNG", "JPEG", "TIFF", "WEBP", "GIF")
# Frames of a multi-page TIFF (a fax, a scanned filing) or an animated GIF read, at most.
MAX_FRAMES = 500
# An image with no resolution of its own is read as a scan at this one.
DEFAULT_DPI = 300


class PictureRefused(Exception):
    def __init__(self, too_large: bool, detail: str) -> None:
        super().__init__(detail)
        self.too_large = too_large


@dataclass(frozen=True)
class Picture:
    image: Image.Image
    dpi: int


def load_plugins() -> None:
    """Import Pillow's decoders now: once confined, the child cannot import a module."""
    Image.init()
    for name in FORMATS:
        assert name in Image.OPEN, name
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS


def warm_up_picture() -> Image.Image:
    """A few words, drawn: what a child reads once before it confines itself."""
    image = Image.new("L", (600, 120), 255)
    draw = ImageDraw.Draw(image)
    draw.text((20, 30), "Warm up 123", fill=0, font_size=48)
    return image


def open_image(body: bytes) -> Image.Image:
    """The image, its header read and nothing decoded; raise PictureRefused for a damaged or
    oversized one."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(body), formats=FORMATS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise PictureRefused(True, str(error)) from None
    except (OSError, ValueError, SyntaxError) as error:
        raise PictureRefused(False, str(error)) from None
    width, height = image.size
    if not 0 < width * height <= MAX_PIXELS:
        raise PictureRefused(True, f"{width:,} x {height:,} pixels")
    return image


def frame_count(image: Image.Image) -> int:
    return 1 if image.format == "GIF" else min(MAX_FRAMES, int(getattr(image, "n_frames", 1)))


def image_frames(image: Image.Image) -> Iterator[Picture]:
    """Each frame of an image, grey, in order (an animated GIF's first only: the rest repeat it)."""
    for index, frame in enumerate(ImageSequence.Iterator(image)):
        if index >= MAX_FRAMES:
            break
        width, height = frame.size
        if not 0 < width * height <= MAX_PIXELS:
            raise PictureRefused(True, f"{width:,} x {height:,} pixels")
        try:
            grey = frame.convert("L")
        except (OSError, ValueError, SyntaxError) as error:
            raise PictureRefused(False, str(error)) from None
        yield Picture(grey, _dpi(frame))
        if image.format == "GIF":
            break


def _dpi(image: Image.Image) -> int:
    found = image.info.get("dpi")
    try:
        dpi = round(float(found[0])) if found else DEFAULT_DPI
    except (TypeError, ValueError, IndexError):
        dpi = DEFAULT_DPI
    return dpi if 70 <= dpi <= 1200 else DEFAULT_DPI


def render_page(page: pdfium.PdfPage) -> Picture:
    """The page as PDFium draws it, grey, at RENDER_DPI or less so that it fits MAX_PIXELS."""
    width, height = page.get_size()
    scale = RENDER_DPI / POINTS_PER_INCH
    area = max(1.0, width * height * scale * scale)
    if area > MAX_PIXELS:
        scale *= math.sqrt(MAX_PIXELS / area)
    bitmap = page.render(scale=scale, grayscale=True, may_draw_forms=False)
    try:
        image = bitmap.to_pil().convert("L")
    finally:
        bitmap.close()
    return Picture(image, max(1, round(scale * POINTS_PER_INCH)))
