"""A PDF's metadata: its information dictionary and its XMP packet, read in the confined child."""

from __future__ import annotations

import orjson
import pytest

from jobs.reader.document import build_document
from jobs.reader.metadata import xmp
from jobs.reader.pdf.text import extract
from jobs.reader.pdf.wire import Reading, WireError, parse_reply, reply_frame
from tests.support.pdfs import Page, Text, build_pdf
from worker.page_metadata import parse

XMP = b"""<?xpacket begin="\xef\xbb\xbf" id="W5M0MpCehiHzreSzNTczkc9d"?>
<x:xmpmeta xmlns:x="adobe:ns:meta/">
 <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
  <rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/"
    xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmlns:prism="http://prismstandard.org/namespaces/basic/2.0/"
    xmp:CreateDate="2023-06-01T09:30:00+02:00" xmp:ModifyDate="2023-06-02T10:00:00Z">
   <dc:format>application/pdf</dc:format>
   <dc:title><rdf:Alt><rdf:li xml:lang="x-default">Findings &amp; Methods</rdf:li></rdf:Alt></dc:title>
   <dc:creator><rdf:Seq><rdf:li>Ada Lovelace</rdf:li><rdf:li>Charles Babbage</rdf:li></rdf:Seq></dc:creator>
   <dc:language><rdf:Bag><rdf:li>en-GB</rdf:li></rdf:Bag></dc:language>
   <prism:doi>10.5555/findings.2023</prism:doi>
  </rdf:Description>
 </rdf:RDF>
</x:xmpmeta>
<?xpacket end="w"?>"""
INFO = {
    "Author": "Grace Hopper; Alan Turing",
    "Subject": "What we found",
    "CreationDate": "D:20240301120000+01'00'",
    "ModDate": "D:20240302080000Z",
}


def pdf(**kwargs: object) -> bytes:
    return build_pdf([Page([Text(72, 700, "The findings of the study.")])], **kwargs)  # type: ignore[arg-type]


async def metadata_of(body: bytes) -> dict[str, object]:
    document = await build_document(
        body,
        "application/pdf",
        "https://x.test/a.pdf",
        extract="main",
        max_chars=10_000,
        cpu_budget_s=5.0,
        body_truncated=False,
    )
    assert document.metadata is not None
    assert parse(document.metadata) == document.metadata
    return dict(document.metadata)


async def test_the_information_dictionary_gives_title_authors_dates_and_subject() -> None:
    found = await metadata_of(pdf(title="Annual Report 2024", info=INFO))
    assert found["headline"] == "Annual Report 2024"
    assert found["author"] == ["Grace Hopper", "Alan Turing"]
    assert found["published"] == "2024-03-01T12:00:00+01:00"
    assert found["modified"] == "2024-03-02T08:00:00Z"
    assert found["description"] == "What we found"
    assert set(found["sources"].values()) == {"pdf-info"}  # type: ignore[attr-defined]


async def test_xmp_gives_what_the_information_dictionary_lacks() -> None:
    found = await metadata_of(pdf(xmp=XMP))
    assert found["headline"] == "Findings & Methods"
    assert found["author"] == ["Ada Lovelace", "Charles Babbage"]
    assert found["published"] == "2023-06-01T09:30:00+02:00"
    assert found["modified"] == "2023-06-02T10:00:00Z"
    assert found["language"] == "en-GB"
    assert found["doi"] == "10.5555/findings.2023"
    assert set(found["sources"].values()) == {"xmp"}  # type: ignore[attr-defined]


async def test_the_information_dictionary_comes_first_and_xmp_fills_the_gaps() -> None:
    found = await metadata_of(pdf(title="Annual Report 2024", info=INFO, xmp=XMP))
    sources = found["sources"]
    assert (found["headline"], found["author"]) == ("Annual Report 2024", ["Grace Hopper", "Alan Turing"])
    assert (found["language"], found["doi"]) == ("en-GB", "10.5555/findings.2023")
    assert sources == {
        "headline": "pdf-info",
        "author": "pdf-info",
        "published": "pdf-info",
        "modified": "pdf-info",
        "description": "pdf-info",
        "language": "xmp",
        "doi": "xmp",
    }


@pytest.mark.parametrize("title", ["Microsoft Word - draft.docx", "report_final.pdf", "Untitled"])
async def test_a_file_name_a_word_processor_wrote_as_the_title_is_no_headline(title: str) -> None:
    assert (await metadata_of(pdf(title=title)))["headline"] is None


async def test_a_pdf_without_metadata_has_nulls() -> None:
    found = await metadata_of(pdf())
    assert found["sources"] == {} and found["author"] == []


async def test_invisible_characters_in_pdf_metadata_are_removed() -> None:
    found = await metadata_of(pdf(info={"Author": "Ada\u200b Love\u202elace"}))
    assert found["author"] == ["Ada Lovelace"]


@pytest.mark.parametrize("date", ["D:00000000", "D:99991231", "D:2024", "garbage", "D:20241399"])
async def test_an_impossible_pdf_date_is_dropped(date: str) -> None:
    assert (await metadata_of(pdf(info={"CreationDate": date})))["published"] is None


def test_the_child_reads_the_declarations_raw() -> None:
    reading = extract(pdf(title="T", info=INFO, xmp=XMP), max_chars=1000, cpu_budget_s=5.0)
    assert reading.declared["info:Title"] == ["T"]
    assert reading.declared["xmp:dc:creator"] == ["Ada Lovelace", "Charles Babbage"]
    assert reading.declared["xmp:xmp:CreateDate"] == ["2023-06-01T09:30:00+02:00"]


def test_of_several_packets_the_one_describing_the_pdf_is_read() -> None:
    image_packet = (
        b"<x:xmpmeta><dc:title><rdf:Alt><rdf:li>photo.jpg</rdf:li></rdf:Alt></dc:title></x:xmpmeta>"
    )
    packet = xmp.document_packet(b"%PDF " + XMP + b" stream " + image_packet)
    assert packet is not None and xmp.field(packet, "dc:title") == ["Findings & Methods"]


@pytest.mark.parametrize(
    "packet",
    [
        b"<x:xmpmeta><dc:title>",
        b"<x:xmpmeta><dc:title><rdf:Alt><rdf:li>x" + b"y" * 300_000 + b"</x:xmpmeta>",
        b"<x:xmpmeta " + b'xmp:CreateDate="' * 10_000 + b"</x:xmpmeta>",
        b"<x:xmpmeta>" + b"<dc:creator>" * 50_000 + b"</x:xmpmeta>",
        b"<x:xmpmeta>" + b"<x:xmpmeta>" * 50_000,
    ],
    ids=["unclosed", "a packet past the bound", "unclosed attributes", "unclosed elements", "no end"],
)
def test_a_broken_xmp_packet_gives_bounded_values_or_none(packet: bytes) -> None:
    found = xmp.document_packet(b"%PDF-1.7 " + packet)
    values = [] if found is None else [v for name in xmp.XMP_FIELDS for v in xmp.field(found, name)]
    assert all(len(value) <= xmp.MAX_VALUE for value in values)


@pytest.mark.parametrize(
    "declared",
    [[], {"k": "v"}, {"k": [1]}, {"k": ["x" * 5000]}, {f"k{n}": [] for n in range(100)}, {"k" * 100: []}],
)
def test_a_reply_with_malformed_declarations_is_a_wire_error(declared: object) -> None:
    frame = reply_frame(Reading(pages=1, pages_read=1, title=""))
    payload = orjson.loads(frame[4:])
    payload["reading"]["declared"] = declared
    with pytest.raises(WireError):
        parse_reply(orjson.dumps(payload))
