"""Bytes to text, in the order browsers use, so a page reads as its author wrote it, not as mojibake.

1. A byte order mark (UTF-8, UTF-16LE, UTF-16BE): it wins over every declaration, as in browsers.
2. The charset of the Content-Type header: it wins over the page's own declaration, as in
   browsers, even when the two disagree (a server's word is the only one a browser trusts there).
3. The page's own declaration: for HTML a ``<meta charset>`` or ``http-equiv`` in the first
   1,024 bytes (html5lib's prescan); for XML types the ``<?xml encoding=...?>`` declaration.
4. UTF-8, when the bytes are UTF-8 (a handful of broken sequences in a long UTF-8 page still
   counts: one stray byte must not turn a whole page into mojibake).
5. For HTML, a meta declaration later in the document (browsers re-decode when the parser meets
   one); then windows-1252, the web's default for undeclared legacy pages.

An unknown label anywhere is ignored and the next step decides. Labels map to codecs through the
WHATWG Encoding Standard's table (webencodings), so ``latin1`` is windows-1252, ``gb2312`` is GBK,
``shift_jis`` is Windows-31J, as a browser would read them.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Literal

import webencodings
from html5lib._inputstream import EncodingParser

Flavor = Literal["html", "xml", "other"]

_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xfe\xff", "utf-16-be"),
    (b"\xff\xfe", "utf-16-le"),
)
# Where the WHATWG decoder is a superset of Python's codec of the same name.
_WIDER_CODEC = {"gbk": "gb18030", "gb2312": "gb18030"}
_XML_DECLARATION = re.compile(rb"^<\?xml[^>]{0,200}?encoding\s*=\s*[\"']([A-Za-z0-9._:\-]{1,40})[\"']")
_PRESCAN_BYTES = 1024
_LATE_META_BYTES = 65536
# UTF-8 that is mostly valid is UTF-8: legacy text almost never forms valid multi-byte sequences,
# so twenty good non-ASCII characters for each broken one is far beyond chance.
_UTF8_GOOD_PER_BAD = 20


@dataclass(frozen=True)
class Decoded:
    text: str
    encoding: str  # the Python codec used
    source: str  # "bom", "header", "meta", "xml", "utf-8", "late-meta" or "default"


def codec_for(label: str | bytes | None) -> str | None:
    """The Python codec for a WHATWG encoding label, or None when the label is unknown or unusable."""
    if label is None:
        return None
    if isinstance(label, bytes):
        try:
            label = label.decode("ascii")
        except UnicodeDecodeError:
            return None
    encoding = webencodings.lookup(label.strip())
    # "replacement" covers ISO-2022-KR, HZ and the like, which browsers refuse to decode (they were
    # used to smuggle markup past filters); the next step of the order decides instead.
    if encoding is None or encoding.name == "replacement":
        return None
    codec: str = _WIDER_CODEC.get(encoding.name, encoding.codec_info.name)
    return codec


def decode(body: bytes, header_charset: str | None, flavor: Flavor) -> Decoded:
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return Decoded(_decode(body[len(bom) :], codec), codec, "bom")
    header_codec = codec_for(header_charset)
    if header_codec is not None:
        return Decoded(_decode(body, header_codec), header_codec, "header")
    if flavor == "xml":
        match = _XML_DECLARATION.match(body[:_PRESCAN_BYTES])
        declared = codec_for(match.group(1)) if match else None
        if declared is not None and not declared.startswith("utf-16"):
            return Decoded(_decode(body, declared), declared, "xml")
    if flavor in ("html", "xml"):
        declared = _meta_codec(body[:_PRESCAN_BYTES])
        if declared is not None:
            return Decoded(_decode(body, declared), declared, "meta")
    utf8 = _as_utf8(body)
    if utf8 is not None:
        return Decoded(utf8, "utf-8", "utf-8")
    if flavor == "html":
        declared = _late_meta_codec(body)
        if declared is not None:
            return Decoded(_decode(body, declared), declared, "late-meta")
    return Decoded(_decode(body, "cp1252"), "cp1252", "default")


def _decode(body: bytes, codec: str) -> str:
    return body.decode(codec, errors="replace")


def _meta_codec(head: bytes) -> str | None:
    found = EncodingParser(head).getEncoding()
    if found is None:
        return None
    # The HTML standard: a page cannot declare UTF-16 from inside itself (the bytes it was read with
    # to find the meta were ASCII-compatible), so such a meta means UTF-8; x-user-defined means 1252.
    if found.name in ("utf-16be", "utf-16le"):
        return "utf-8"
    if found.name == "x-user-defined":
        return "cp1252"
    return codec_for(found.name)


_META_CHARSET = re.compile(
    rb"<meta[^>]{0,300}?charset\s*=\s*[\"']?\s*([A-Za-z0-9._:\-]{1,40})", re.IGNORECASE
)


def _late_meta_codec(body: bytes) -> str | None:
    match = _META_CHARSET.search(body, 0, _LATE_META_BYTES)
    if match is None:
        return None
    codec = codec_for(match.group(1))
    if codec is None or codec.startswith("utf-16") or codec == "utf-8":
        return None
    return codec


def _as_utf8(body: bytes) -> str | None:
    # A body cut at the byte cap can end inside a character; that tail is not a reason to doubt it.
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        return str(decoder.decode(body, final=False))
    except UnicodeDecodeError:
        pass
    text = body.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - body.count(b"\xef\xbf\xbd")
    good = len(text) - len(text.encode("ascii", errors="ignore")) - bad
    if good >= _UTF8_GOOD_PER_BAD * max(bad, 1):
        return text
    return None
