"""Tesseract (through tesserocr, its C++ API in the process) reading one picture of text.

It runs inside the confined PDF child, which can open no file and start no process: so the
engine is made (its language models loaded) before the child confines itself, and it is the
library, not the ``tesseract`` command, that reads (a command would need a process and files).
Each page is bounded by Tesseract's own deadline (its ETEXT_DESC monitor cancels recognition past
it); the kernel's CPU limit on the child bounds the document.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import tesserocr
from PIL import Image

# Where Debian's tesseract-ocr-* packages (and the usual source builds) put the language models.
TESSDATA_DIRS = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
)
# A language list as RESEARCH_OCR_LANGUAGES gives it: Tesseract's codes joined by "+".
MAX_LANGUAGES = 8


@dataclass(frozen=True)
class PageText:
    text: str
    confidence: float  # Tesseract's mean word confidence, 0 to 100
    complete: bool  # False when the page's deadline cancelled recognition


class OcrUnavailable(Exception):
    """Tesseract or one of the languages asked for is not installed."""


def tessdata_dir(languages: str) -> str:
    """The first models folder that holds every language asked for."""
    wanted = languages.split("+")
    for folder in TESSDATA_DIRS:
        if all((Path(folder) / f"{code}.traineddata").is_file() for code in wanted):
            return folder
    raise OcrUnavailable(f"no Tesseract models for {languages} in {', '.join(TESSDATA_DIRS)}")


class Engine:
    """One Tesseract instance, its models loaded once, reading one picture at a time."""

    def __init__(self, languages: str) -> None:
        self.languages = languages
        self._api = tesserocr.PyTessBaseAPI(path=tessdata_dir(languages), lang=languages)
        # tesserocr points Tesseract's messages at /dev/null, which Tesseract opens for each one:
        # a confined child can open nothing, so they go to stderr (the null device) instead.
        self._api.SetVariable("debug_file", "")
        self.name = f"tesseract {self._api.Version()}"

    def read(self, image: Image.Image, *, dpi: int, deadline_s: float) -> PageText:
        """The text Tesseract sees in ``image``; recognition is cancelled after ``deadline_s``."""
        self._api.SetImage(image)
        self._api.SetSourceResolution(dpi)
        started = time.monotonic()
        complete = bool(self._api.Recognize(timeout=max(1, int(deadline_s * 1000))))
        complete = complete and time.monotonic() - started < deadline_s
        text = self._api.GetUTF8Text() if complete else ""
        confidence = float(self._api.MeanTextConf()) if complete and text.strip() else 0.0
        self._api.Clear()
        return PageText(text, max(0.0, min(100.0, confidence)), complete)

    def close(self) -> None:
        self._api.End()
