"""Where Tesseract's language models are: found without loading Tesseract (the worker asks at
start-up; only the PDF child loads the engine)."""

from __future__ import annotations

from pathlib import Path

# Where Debian's tesseract-ocr-* packages (and the usual source builds) put the language models.
TESSDATA_DIRS = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
)


class OcrUnavailable(Exception):
    """Tesseract or one of the languages asked for is not installed."""


def tessdata_dir(languages: str) -> str:
    """The first models folder that holds every language asked for."""
    wanted = languages.split("+")
    for folder in TESSDATA_DIRS:
        if all((Path(folder) / f"{code}.traineddata").is_file() for code in wanted):
            return folder
    raise OcrUnavailable(f"no Tesseract models for {languages} in {', '.join(TESSDATA_DIRS)}")
