"""An image fetched directly (PNG, JPEG, TIFF, WebP, GIF) to its text, by OCR, in the PDF child.

Each frame is a page (a multi-page TIFF is how fax and scanner software file a document); the
reply has the shape of a PDF's, so the worker cuts, keeps and pages it the same way.
"""

from __future__ import annotations

from jobs.reader.hidden import strip_invisible
from jobs.reader.ocr.pictures import PictureRefused, frame_count, open_image
from jobs.reader.ocr.run import OcrRun
from jobs.reader.pdf.text import clean
from jobs.reader.pdf.wire import PdfRefused, Reading, Refusal


def extract_image(body: bytes, *, max_chars: int, ocr: OcrRun | None, from_page: int = 0) -> Reading:
    if ocr is None:
        raise PdfRefused(Refusal.OCR_OFF)
    try:
        image = open_image(body)
        reading = Reading(pages=frame_count(image), pages_read=0, title="")
        reading.pages_read = min(from_page, reading.pages)
        reading.texts.extend([""] * reading.pages_read)
        reading.uris.extend([] for _ in range(reading.pages_read))
        length = 0
        for text in ocr.read_images(image, reading, from_page):
            cleaned, invisible = strip_invisible(clean(text))
            reading.hidden_removed += invisible
            reading.texts.append(cleaned)
            reading.uris.append([])
            reading.pages_read += 1
            length += len(cleaned) + 2
            if length >= max_chars:
                break
    except PictureRefused as refused:
        raise PdfRefused(Refusal.IMAGE_TOO_LARGE if refused.too_large else Refusal.IMAGE_DAMAGED) from None
    except (OSError, ValueError, SyntaxError, EOFError):
        raise PdfRefused(Refusal.IMAGE_DAMAGED) from None
    return reading
