"""A PDF's declared metadata as raw strings, read inside the confined PDF child.

Two places hold it: the document information dictionary, which PDFium reads (Title, Author,
Subject, CreationDate, ModDate), and the XMP packet, an XML stream PDFium does not expose. XMP
is found in the file's bytes: the standard asks producers to leave it uncompressed so that tools
which do not read PDF can find it (a compressed one is not read). A file may hold several
packets (an embedded image carries its own); the document's is the last one that describes a
PDF, else the last one. Everything is bounded: at most MAX_PACKETS packets of MAX_PACKET bytes
are looked at, each field is found by plain searches (never a backtracking pattern over the
packet), and at most MAX_VALUES values of MAX_VALUE characters cross the pipe per field.
"""

from __future__ import annotations

import html
import re
from typing import Protocol

INFO_KEYS = ("Title", "Author", "Subject", "CreationDate", "ModDate")
XMP_FIELDS = (
    "dc:title",
    "dc:creator",
    "dc:description",
    "dc:language",
    "dc:identifier",
    "dc:date",
    "xmp:CreateDate",
    "xmp:ModifyDate",
    "prism:doi",
    "pdfx:doi",
    "prism:publicationDate",
)
START = b"<x:xmpmeta"
END = b"</x:xmpmeta>"
MAX_PACKETS = 16
MAX_PACKET = 256 * 1024
MAX_VALUES = 20
MAX_VALUE = 2000
_ITEM = re.compile(r"<rdf:li\b[^>]*>([^<]*)</rdf:li>")
_TAGS = re.compile(r"<[^<>]*>")


class InfoSource(Protocol):
    def get_metadata_value(self, key: str) -> str: ...


def declared(document: InfoSource, body: bytes) -> dict[str, list[str]]:
    """``{"info:Title": [...], "xmp:dc:creator": [...], ...}``: what the PDF declares, raw."""
    found: dict[str, list[str]] = {}
    for key in INFO_KEYS:
        value = document.get_metadata_value(key)
        if value:
            found[f"info:{key}"] = [value[:MAX_VALUE]]
    packet = document_packet(body)
    if packet is not None:
        for name in XMP_FIELDS:
            values = field(packet, name)
            if values:
                found[f"xmp:{name}"] = values
    return found


def document_packet(body: bytes) -> str | None:
    packets: list[bytes] = []
    position = 0
    while len(packets) < MAX_PACKETS:
        start = body.find(START, position)
        if start == -1:
            break
        end = body.find(END, start, start + MAX_PACKET)
        if end == -1:
            position = start + len(START)
            continue
        packets.append(body[start:end])
        position = end + len(END)
    if not packets:
        return None
    chosen = next(
        (p for p in reversed(packets) if b"application/pdf" in p or b"pdf:Producer" in p), packets[-1]
    )
    return chosen.decode("utf-8", "replace")


def field(packet: str, name: str) -> list[str]:
    """A property's values: as an attribute (``xmp:CreateDate="..."``), or as an element holding
    text or an rdf:Alt, rdf:Seq or rdf:Bag of rdf:li items."""
    attribute = packet.find(f'{name}="')
    opening = packet.find(f"<{name}")
    if attribute != -1 and (opening == -1 or attribute < opening):
        start = attribute + len(name) + 2
        end = packet.find('"', start, start + 4 * MAX_VALUE)
        return [_text(packet[start:end])] if end != -1 else []
    if opening == -1:
        return []
    after = packet.find(">", opening)
    close = packet.find(f"</{name}>", after)
    if after == -1 or close == -1 or packet[after - 1] == "/":
        return []
    inner = packet[after + 1 : close]
    items = [_text(item) for item in _ITEM.findall(inner)[:MAX_VALUES]]
    if not items and "<" not in inner:
        items = [_text(inner)]
    return [item for item in items if item]


def _text(raw: str) -> str:
    return html.unescape(_TAGS.sub("", raw[: 4 * MAX_VALUE])).strip()[:MAX_VALUE]
