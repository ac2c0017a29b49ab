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

import tesserocr
from PIL import Image

from jobs.reader.ocr.models import OcrUnavailable, tessdata_dir

__all__ = ["Engine", "OcrUnavailable", "PageText"]


@dataclass(frozen=True)
class PageText:
    text: str
    confidence: float  # Tesseract's mean word confidence, 0 to 100
    complete: bool  # False when the page's deadline cancelled recognition


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
