"""Office documents (DOCX, XLSX, PPTX, ODT, ODS, ODP) read in the PDF child as Markdown and text.

The oracle is what the test wrote into each file with the library that writes the format
(tests/support/office_docs.py), read back out of the Markdown by a real CommonMark parser with
GitHub tables (markdown-it-py): headings at their levels, list items, table cells, known lines.
Hostile files (zip bombs, entity expansion, external references, macros) end in a named refusal
or a named note, quickly, with nothing reaching the network.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from jobs.reader.document import build_document
from tests.support import office_docs
from tests.support.markdown_structure import structure
from tests.support.office_docs import HEADINGS, ITEMS, LINES, MAKERS, TABLE, rezipped
from worker.errors import UnsupportedContentType

TYPES = {
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "odt": "application/vnd.oasis.opendocument.text",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "odp": "application/vnd.oasis.opendocument.presentation",
}
# Which structures each format holds (a spreadsheet has no list; a slide deck's list is its bullets).
HAS_LIST = {"docx", "pptx", "odt", "odp"}
HAS_TABLE = {"docx", "xlsx", "pptx", "odt", "ods", "odp"}


async def read(body: bytes, content_type: str | None, fmt: str = "markdown") -> Any:
    return await build_document(
        body,
        content_type,
        "https://example.org/report",
        extract="full",
        max_chars=200_000,
        cpu_budget_s=5.0,
        body_truncated=False,
        format=fmt,
    )


@pytest.mark.parametrize("name", sorted(MAKERS))
async def test_each_format_reads_with_its_headings_lists_tables_and_lines(name: str) -> None:
    document = await read(MAKERS[name](), TYPES[name])
    headings, items, rows = structure(document.text)
    heading_texts = [text for _, text in headings]
    if name in ("xlsx", "ods"):
        assert headings == [(2, "Accounts"), (2, "Notes")]  # one table per sheet, under its name
    else:
        assert HEADINGS[0] in heading_texts
    if name in ("docx", "odt"):
        assert (1, HEADINGS[0]) in headings and (2, HEADINGS[1]) in headings
    if name in HAS_LIST:
        assert list(ITEMS) == [item for item in items if item in ITEMS]
    if name in HAS_TABLE:
        assert [list(row) for row in TABLE] == [
            row for row in rows if row and row[0] in ("Year", "2023", "2024")
        ]
    plain = (await read(MAKERS[name](), TYPES[name], "text")).text
    recalled = sum(line in plain for line in LINES)
    assert recalled / len(LINES) >= 0.98, (name, recalled)
    assert document.content_type == TYPES[name]
    assert document.refused is None


async def test_an_undeclared_office_file_is_sniffed_as_a_zip_and_read() -> None:
    document = await read(MAKERS["docx"](), None)
    assert HEADINGS[0] in document.text


async def test_slides_carry_their_notes() -> None:
    document = await read(office_docs.pptx_bytes(), TYPES["pptx"], "text")
    assert "Notes: " + LINES[0] in document.text


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r>
<w:t>&lol3;</w:t></w:r></w:p></w:body></w:document>"""


def zip_bomb_by_ratio() -> bytes:
    return rezipped(office_docs.docx_bytes(), {"word/media/zeros.bin": b"\0" * (4 * 1024 * 1024)})


def zip_bomb_by_total() -> bytes:
    # Each member 1 MiB of zeros (at the ratio's floor, so not judged by ratio), 201 of them:
    # a body of a few hundred KB that inflates past the 200 MiB total bound.
    members = {f"word/media/m{n}.bin": b"\0" * (1024 * 1024) for n in range(201)}
    return rezipped(office_docs.docx_bytes(), members)


@pytest.mark.parametrize(
    ("maker", "named"),
    [
        (zip_bomb_by_ratio, "zip_bomb"),
        (zip_bomb_by_total, "zip_bomb"),
        (lambda: rezipped(office_docs.docx_bytes(), {"word/document.xml": BILLION_LAUGHS}), "xml_entities"),
        (lambda: b"PK\x03\x04 not really a zip" * 10, "damaged"),
    ],
    ids=["zip-ratio", "zip-total", "billion-laughs", "not-a-zip"],
)
async def test_a_hostile_file_is_refused_by_name_within_twenty_seconds(maker: object, named: str) -> None:
    body = maker()  # type: ignore[operator]
    started = time.monotonic()
    with pytest.raises(UnsupportedContentType) as refused:
        await read(body, TYPES["docx"])
    assert time.monotonic() - started < 20
    assert named in refused.value.message
    # The worker and its child pool read on: the next document is read as if nothing had happened.
    assert HEADINGS[0] in (await read(office_docs.docx_bytes(), TYPES["docx"])).text


def external_parts(url: str) -> dict[str, bytes]:
    rels = (
        b'<?xml version="1.0" encoding="UTF-8"?><Relationships '
        b'xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        b'<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
        b'attachedTemplate" Target="' + url.encode() + b'" TargetMode="External"/></Relationships>'
    )
    return {"word/_rels/settings.xml.rels": rels, "word/vbaProject.bin": b"\xd0\xcf\x11\xe0 macro"}


async def test_external_references_and_macros_are_named_and_never_followed() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/template.dotm"
    body = rezipped(office_docs.docx_bytes(), external_parts(url))
    try:
        document = await read(body, TYPES["docx"])
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing connected: the template was never fetched
    finally:
        listener.close()
    assert HEADINGS[0] in document.text  # the document itself is read
    refused = " ".join(document.refused or ())
    assert "external_reference: attachedTemplate " + url in refused
    assert "macro: word/vbaProject.bin was ignored" in refused


async def test_an_includepicture_field_is_named() -> None:
    original = office_docs.docx_bytes()
    import io
    import zipfile

    xml = zipfile.ZipFile(io.BytesIO(original)).read("word/document.xml")
    field = (
        b'<w:p><w:fldSimple w:instr=" INCLUDEPICTURE &quot;http://127.0.0.2/x.png&quot; \\d ">'
        b"<w:r><w:t>picture</w:t></w:r></w:fldSimple></w:p>"
    )
    xml = xml.replace(b"<w:sectPr", field + b"<w:sectPr", 1)
    document = await read(rezipped(original, {"word/document.xml": xml}), TYPES["docx"])
    assert any("INCLUDEPICTURE" in note for note in document.refused or ())
