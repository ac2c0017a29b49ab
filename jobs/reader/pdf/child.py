"""The PDF child process: reads PDFs sent by its worker, one at a time, and answers with their text.

The worker's pool starts it as ``python -I -m jobs.reader.pdf.child MEMORY_BYTES [NICENESS
[LANGUAGES]]`` with an empty environment (no keys, no Redis address) and no descriptor but its
three pipes. It reads PDFs, images (by OCR, ``jobs.reader.ocr``) and office documents
(``jobs.reader.office``). Before it reads any PDF it confines itself, so that even a PDF that
takes over PDFium finds nothing to use:

- it lowers its own priority (NICENESS), so a core it shares with its worker is the worker's first;
- its address space is capped (RLIMIT_AS), so a decompression bomb fails inside the child;
- it can open no file and no socket (RLIMIT_NOFILE is lowered to the three pipes it holds), and
  can write no file (RLIMIT_FSIZE 0), start no process (RLIMIT_NPROC 0) and dump no core;
- before each PDF its CPU-time limit (RLIMIT_CPU) is set to what it has used plus that PDF's
  limit, so the kernel stops a runaway parse with SIGXCPU.

The worker enforces the wall-clock limit from outside. A MemoryError ends the child with exit
status 3 (its heap may be left in pieces), and any other exception ends it too: the worker reports
the limit, or a crash, and starts a fresh child for the next PDF.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import math
import os
import resource
import sys

import pypdfium2 as pdfium

from jobs.reader.ocr.engine import Engine, OcrUnavailable
from jobs.reader.ocr.pictures import load_plugins, warm_up_picture
from jobs.reader.office.warm import warm_office
from jobs.reader.pdf.reading import read_request_body
from jobs.reader.pdf.text import extract
from jobs.reader.pdf.wire import read_request, reply_frame, write_all

REQUESTS_FD = 0
REPLIES_FD = 1
EXIT_OUT_OF_MEMORY = 3


def warm_up(languages: str) -> Engine | None:
    """Load now what reading loads lazily (PDFium's helpers, the UTF-16 codec, Pillow's decoders,
    Tesseract's models, the office readers' modules): once confined, the child can open no file,
    not even a Python module. Returns the OCR engine, or None with OCR off or not installed."""
    codecs.lookup("utf-16-le")
    load_plugins()
    blank = pdfium.PdfDocument.new()
    blank.new_page(200, 200).close()
    buffer = io.BytesIO()
    blank.save(buffer)
    blank.close()
    engine = None
    if languages:
        try:
            engine = Engine(languages)
        except (OcrUnavailable, RuntimeError):
            engine = None  # each scan is then read as having no text, and says so
    extract(buffer.getvalue(), max_chars=100, cpu_budget_s=1.0)
    if engine is not None:
        # Tesseract loads parts of its models at its first recognition, not at its start.
        engine.read(warm_up_picture(), dpi=300, deadline_s=30.0)
    warm_office()
    return engine


def confine(memory_bytes: int) -> None:
    """The limits that hold for the child's whole life (the CPU limit is set per document)."""
    # A stray print goes to stderr (the null device), never into the reply pipe.
    sys.stdout = sys.stderr
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (3, 3))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def limit_cpu(seconds: float) -> None:
    """Let the next document use ``seconds`` more CPU time than the child has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(
        resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard)
    )


def serve(engine: Engine | None) -> int:
    while True:
        request = read_request(REQUESTS_FD)
        if request is None:
            return 0  # the worker closed the pipe: it is stopping, or it retired this child
        limit_cpu(request.cpu_limit_s)
        try:
            reply = read_request_body(request, engine)
        except MemoryError:
            return EXIT_OUT_OF_MEMORY
        write_all(REPLIES_FD, reply_frame(reply))


def main(argv: list[str]) -> int:
    if len(argv) > 2:
        with contextlib.suppress(OSError):
            os.nice(int(argv[2]))
    engine = warm_up(argv[3] if len(argv) > 3 else "")
    confine(int(argv[1]))
    return serve(engine)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
