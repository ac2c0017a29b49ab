"""Office documents: the reader (jobs/reader/office, in the PDF child) beside MarkItDown, same files.

The files are made here with the libraries that write each format (tests/support/office_docs.py:
python-docx, openpyxl, python-pptx, odfpy), and, where LibreOffice is installed, the DOCX saved
again as ODT by LibreOffice (``soffice --headless --convert-to odt``), which writes the styles,
list styles and automatic styles a real ODT has. Each holds known headings (with their levels),
list items, a table and twenty known lines.

Figures per file and reader: recall of the known lines (each found whole in the output, spaces
collapsed), and structure as a CommonMark parser with GitHub tables (markdown-it-py) reads the
Markdown back: headings found at their level, list items found as list items, table rows found as
table rows. MarkItDown (``pip install 'markitdown[docx,xlsx,pptx]'``, in the bench extra) reads no
OpenDocument format: n/a there.

    python bench/office.py

Targets (issue 39): every format read with its headings, lists and tables, recall >= 98 %.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.markdown_structure import structure
from tests.support.office_docs import HEADINGS, ITEMS, LINES, MAKERS, TABLE

# What each format holds: a spreadsheet has sheets (their names are its headings), no list.
EXPECTED_HEADINGS = {
    "docx": [(1, HEADINGS[0]), (2, HEADINGS[1])],
    "odt": [(1, HEADINGS[0]), (2, HEADINGS[1])],
    "pptx": [(2, HEADINGS[0]), (2, HEADINGS[1])],
    "odp": [(2, HEADINGS[0])],
    "xlsx": [(2, "Accounts"), (2, "Notes")],
    "ods": [(2, "Accounts"), (2, "Notes")],
}
HAS_LIST = {"docx", "odt", "pptx", "odp"}


def score(kind: str, markdown: str) -> tuple[float, str]:
    """Recall of the known lines, and which structures were found (H, L, T), of those expected."""
    flat = " ".join(markdown.replace("\\", "").split())
    recall = sum(line in flat for line in LINES) / len(LINES)
    headings, items, rows = structure(markdown)
    found = []
    found.append("H" if all(h in headings for h in EXPECTED_HEADINGS[kind]) else "-")
    if kind in HAS_LIST:
        found.append("L" if all(item in items for item in ITEMS) else "-")
    table = [list(row) for row in TABLE]
    found.append("T" if all(row in rows for row in table) else "-")
    return recall, "".join(found)


def ours(body: bytes, content_type: str) -> str:
    from jobs.reader.document import build_document

    document = asyncio.run(
        build_document(
            body,
            content_type,
            "https://example.org/file",
            extract="full",
            max_chars=10**7,
            cpu_budget_s=10.0,
            body_truncated=False,
            format="markdown",
        )
    )
    return document.text


def markitdown(body: bytes, kind: str) -> str | None:
    try:
        from markitdown import MarkItDown
    except ImportError:
        return None
    if kind not in ("docx", "xlsx", "pptx"):
        return None
    with tempfile.NamedTemporaryFile(suffix=f".{kind}") as handle:
        handle.write(body)
        handle.flush()
        return str(MarkItDown().convert(handle.name).text_content)


TYPES = {
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "odt": "application/vnd.oasis.opendocument.text",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "odp": "application/vnd.oasis.opendocument.presentation",
}


def libreoffice_odt(docx: bytes) -> bytes | None:
    soffice = shutil.which("soffice")
    if soffice is None:
        return None
    with tempfile.TemporaryDirectory(prefix="office-bench-") as scratch:
        source = Path(scratch) / "file.docx"
        source.write_bytes(docx)
        profile = f"-env:UserInstallation=file://{scratch}/profile"
        subprocess.run(
            [soffice, profile, "--headless", "--convert-to", "odt", "--outdir", scratch, str(source)],
            capture_output=True,
            timeout=300,
            check=False,
        )
        converted = Path(scratch) / "file.odt"
        return converted.read_bytes() if converted.exists() else None


def main() -> None:
    writers = {"docx": "python-docx", "xlsx": "openpyxl", "pptx": "python-pptx"}
    files: list[tuple[str, str, Callable[[], bytes | None]]] = [
        (f"{kind} ({writers.get(kind, 'odfpy')})", kind, maker) for kind, maker in MAKERS.items()
    ]
    files.append(("odt (LibreOffice, from the docx)", "odt", lambda: libreoffice_odt(MAKERS["docx"]())))
    print("recall of 20 known lines; structure found: H headings at their levels, L list items, T table rows")
    print(f"{'file':36} {'ours recall':>12} {'ours':>5} {'ms':>7}   {'MarkItDown':>10} {'':>5} {'ms':>7}")
    worst, complete = 1.0, True
    # The child starts (and loads its readers) and MarkItDown imports before anything is timed.
    ours(MAKERS["docx"](), TYPES["docx"])
    markitdown(MAKERS["docx"](), "docx")
    for name, kind, maker in files:
        body = maker()
        if body is None:
            print(f"{name:36} skipped (LibreOffice is not installed or could not convert)")
            continue
        started = time.perf_counter()
        mine = ours(body, TYPES[kind])
        mine_ms = 1000 * (time.perf_counter() - started)
        recall, shape = score(kind, mine)
        worst = min(worst, recall)
        complete = complete and "-" not in shape
        started = time.perf_counter()
        theirs = markitdown(body, kind)
        theirs_ms = 1000 * (time.perf_counter() - started)
        if theirs is None:
            other = f"{'n/a':>10} {'':>5} {'':>7}"
        else:
            their_recall, their_shape = score(kind, theirs)
            other = f"{100 * their_recall:9.0f}% {their_shape:>5} {theirs_ms:7.0f}"
        print(f"{name:36} {100 * recall:11.0f}% {shape:>5} {mine_ms:7.0f}   {other}")
    met = worst >= 0.98 and complete
    print(
        f"verdict: {'met' if met else 'MISSED'} (worst recall {100 * worst:.0f}%, target >= 98%; "
        f"every heading, list and table found: {complete})"
    )


if __name__ == "__main__":
    main()
