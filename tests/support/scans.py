"""Scanned pages made here: text drawn with PIL (one or two columns, a slight rotation, speckle
noise), saved as images or as a PDF of images with no text layer. The text drawn is the oracle."""

from __future__ import annotations

import io
import random
from collections.abc import Sequence

from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"
DPI = 200
PAGE = (int(8.27 * DPI), int(11.69 * DPI))  # A4 at DPI
WORDS = [
    "registry",
    "extract",
    "company",
    "director",
    "annual",
    "accounts",
    "filing",
    "court",
    "order",
    "shareholder",
    "capital",
    "address",
    "signed",
    "certificate",
    "minutes",
    "board",
    "meeting",
    "resolution",
    "auditor",
    "report",
    "revenue",
    "statement",
    "notice",
    "appointment",
    "secretary",
    "dissolved",
    "incorporated",
    "office",
    "payment",
]


def sentences(seed: int, count: int) -> list[str]:
    """Lines of plain words, each 6 to 9 of them: the text a page shows."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 7))).capitalize() for _ in range(count)]


def page_image(
    lines: Sequence[str], *, columns: int = 1, rotate: float = 0.0, noise: float = 0.0, seed: int = 0
) -> Image.Image:
    """An A4 page at DPI with ``lines`` drawn in ``columns``, turned by ``rotate`` degrees, with
    ``noise`` (a fraction of pixels) flipped to black."""
    image = Image.new("L", PAGE, 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(FONT, 30)
    margin, step = 120, 48
    per_column = (PAGE[1] - 2 * margin) // step
    width = (PAGE[0] - 2 * margin) // columns
    for index, line in enumerate(lines):
        column, row = divmod(index, per_column)
        if column >= columns:
            break
        draw.text((margin + column * width, margin + row * step), line, font=font, fill=0)
    if rotate:
        image = image.rotate(rotate, resample=Image.Resampling.BICUBIC, fillcolor=255, expand=False)
    if noise:
        rng = random.Random(seed)
        pixels = image.load()
        assert pixels is not None
        for _ in range(int(PAGE[0] * PAGE[1] * noise)):
            pixels[rng.randrange(PAGE[0]), rng.randrange(PAGE[1])] = 0
    return image


def image_bytes(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, dpi=(DPI, DPI))
    return buffer.getvalue()


def scanned_pdf(pages: Sequence[Image.Image]) -> bytes:
    """A PDF whose pages are the images, and nothing else: no text layer at all."""
    buffer = io.BytesIO()
    first, *rest = [page.convert("L") for page in pages]
    first.save(buffer, format="PDF", save_all=True, append_images=rest, resolution=DPI)
    return buffer.getvalue()
