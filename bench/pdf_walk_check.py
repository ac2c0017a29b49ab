"""The C page walk against the Python walk it replaced, over every page of the printed corpora.

tests/test_pdf_native_walk.py holds the two walks (jobs/reader/pdf/_walk.c and scan.PageScan._walk)
to the same answers on generated pages; this runs the same comparison on real ones: the PDFs
bench/pdf.py prints from the extraction corpus. For each page both walks run on the same loaded
page; the figures are the pages compared, how many left text for the full judgement, how many had
text judged hidden, and the pages where the walks disagree (the anchor: zero), with the time each
walk took.

Usage: ``python bench/pdf_walk_check.py [--limit N] [--corpus NAME]``. Skips with a message when
the corpus or chromium is absent.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.extraction import SCORERS, load  # noqa: E402
from bench.pdf import pdf_path, print_corpus  # noqa: E402


def check(paths: list[Path]) -> dict[str, float]:
    import pypdfium2 as pdfium

    from jobs.reader.pdf.scan import PageScan

    figures = {"pages": 0, "undecided": 0, "hidden": 0, "disagree": 0, "c_s": 0.0, "python_s": 0.0}
    for path in paths:
        document = pdfium.PdfDocument(path.read_bytes())
        try:
            for page in document:
                try:
                    started = time.process_time()
                    reference = PageScan(page, native=False)
                    middle = time.process_time()
                    native = PageScan(page)
                    figures["python_s"] += middle - started
                    figures["c_s"] += time.process_time() - middle
                    figures["pages"] += 1
                    figures["undecided"] += bool(native._undecided)
                    figures["hidden"] += bool(native.hidden)
                    verdicts = (native.hidden, native.straddling, native.images)
                    left = {(o, h.value) for o, h, _ in native._undecided}
                    # The C walk settles more itself: what it leaves must be a part of the rest.
                    if verdicts != (reference.hidden, reference.straddling, reference.images) or not left <= {
                        (o, h.value) for o, h, _ in reference._undecided
                    }:
                        figures["disagree"] += 1
                        print(f"  disagree: {path.name} page {figures['pages']}")
                finally:
                    page.close()
        finally:
            document.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="documents per corpus (0: all)")
    parser.add_argument("--corpus", choices=sorted(SCORERS), action="append")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("skipped: no chromium to print the corpus with (apt-get install chromium)")
        return
    for corpus in args.corpus or sorted(SCORERS):
        pages = load(corpus)
        if not pages:
            print(f"{corpus}: skipped, the corpus is not in ../shared/data/extraction")
            continue
        printed = print_corpus(corpus, pages[: args.limit] if args.limit else pages, chromium)
        figures = check([pdf_path(corpus, page) for page in printed])
        per_page = 1000 / max(1, figures["pages"])
        print(
            f"{corpus}: {len(printed)} PDFs, {figures['pages']:.0f} pages; text left for the judgement on "
            f"{figures['undecided']:.0f}, hidden text on {figures['hidden']:.0f}; walks disagree on "
            f"{figures['disagree']:.0f} pages (anchor: 0). Walk CPU per page: C + judgement "
            f"{figures['c_s'] * per_page:.3f} ms, Python + judgement {figures['python_s'] * per_page:.3f} ms"
        )


if __name__ == "__main__":
    main()
