"""A document's whole text in either format fetch_page returns: ``"markdown"`` or ``"text"``.

The reader keeps what the text is made from (``Readable``): for HTML the chosen blocks and the
canonical URL of each link among them, for a PDF its pages, for any other text its body. The
whole text is rendered from that, uncut; the result's cap (and any piece a caller cuts) applies to
what was rendered, so the bound is counted on the format the agent reads.

- ``"text"``: the blocks joined as they always were, the PDF's pages with a blank line between
  them, the body as served.
- ``"markdown"``: the blocks as Markdown (markdown.py); a PDF as its text, escaped, with a line
  ``<!-- page N -->`` before each page and no structure invented; any other body (JSON, plain
  text, even Markdown) as one fenced code block, so nothing in it is read as markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from jobs.reader import markdown, markdown_escape
from jobs.reader.cpu_budget import CpuBudget
from jobs.reader.html.blocks import Block
from jobs.reader.main_content import join_blocks

MARKDOWN = "markdown"
TEXT = "text"
FORMATS = (MARKDOWN, TEXT)
# Units rendered between two pauses of a paced rendering: each is a block or a table.
PACE_UNITS = 64


@dataclass(frozen=True)
class Readable:
    """What a document's text is rendered from."""

    plain: str  # the whole text in the "text" format
    blocks: Sequence[Block] | None = None  # HTML: the chosen blocks
    # HTML: link (an index into the reduction's hrefs) -> its number, its place in the result's
    # ``links`` counted from 1
    targets: Mapping[int, int] = field(default_factory=dict)
    pages: Sequence[str] | None = None  # PDFs: each page's text, in order, empty ones included
    markdown: str | None = None  # office documents: the Markdown their reader wrote


def whole_text(readable: Readable, fmt: str) -> str:
    """The whole, uncut text in ``fmt`` (one of FORMATS)."""
    if fmt == TEXT:
        return readable.plain
    if readable.blocks is not None:
        return markdown.render(readable.blocks, readable.targets)
    if readable.pages is not None:
        return pdf_markdown(readable.pages)
    if readable.markdown is not None:
        return readable.markdown
    return fenced(readable.plain)


async def whole_text_paced(readable: Readable, fmt: str, budget: CpuBudget) -> str:
    """``whole_text``, yielding to the event loop as the reader's other steps do."""
    if fmt == TEXT or readable.blocks is None:
        return whole_text(readable, fmt)
    parts: list[str] = []
    for count, piece in enumerate(markdown.pieces(readable.blocks, readable.targets), 1):
        parts.append(piece)
        if count % PACE_UNITS == 0:
            await budget.pause()
    return "".join(parts)


def page_marker(number: int) -> str:
    return f"<!-- page {number} -->"


def pdf_markdown(pages: Sequence[str]) -> str:
    """A PDF's pages, each after its marker line, each line escaped (and without the leading
    spaces that would read as code)."""
    return "\n\n".join(_pdf_parts(pages))


def page_offsets(readable: Readable, fmt: str) -> list[int] | None:
    """For a PDF, where each page starts in ``whole_text(readable, fmt)``: in Markdown its marker
    line, in the text its first character (an empty page starts where the next one does); None
    for anything else."""
    pages = readable.pages
    if pages is None:
        return None
    offsets: list[int] = []
    at = 0
    if fmt == MARKDOWN:
        for number, part in enumerate(_pdf_parts(pages)):
            if part.startswith("<!-- page "):
                offsets.append(at + (2 if number else 0))
            at += len(part) + (2 if number else 0)
        return offsets
    for page in pages:
        offsets.append(at)
        if page:
            at += len(page) + 2
    return offsets


def _pdf_parts(pages: Sequence[str]) -> list[str]:
    parts: list[str] = []
    for number, page in enumerate(pages, 1):
        parts.append(page_marker(number))
        lines = [markdown_escape.line(line.strip()) for line in page.replace("\r", "\n").split("\n")]
        body = "\n".join(lines).strip("\n")
        if body:
            parts.append(body)
    return parts


def fenced(text: str) -> str:
    """A body that is not HTML, as one code block: read as exactly what it is."""
    fence = markdown_escape.fence(text)
    return f"{fence}\n{text}\n{fence}" if text else ""


def html_readable(
    blocks: Sequence[Block], hrefs: Sequence[str], canonical: Mapping[str, str], links: Sequence[str]
) -> Readable:
    """An HTML page's Readable: ``canonical`` maps each raw href to its canonical link, and
    ``links`` are the result's links, which the Markdown's references number."""
    numbers = {link: number for number, link in enumerate(links, 1)}
    targets = {
        index: numbers[canonical[href]]
        for index, href in enumerate(hrefs)
        if href in canonical and canonical[href] in numbers
    }
    return Readable(plain=join_blocks(list(blocks)), blocks=blocks, targets=targets)
