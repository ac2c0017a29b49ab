"""Bytes to text, in the order browsers use, so a page reads as its author wrote it, not as mojibake.

1. A byte order mark (UTF-8, UTF-16LE, UTF-16BE): it wins over every declaration, as in browsers.
2. The charset of the Content-Type header: it wins over the page's own declaration, as in
   browsers, even when the two disagree (a server's word is the only one a browser trusts there).
3. The page's own declaration: for HTML a ``<meta charset>`` or ``http-equiv`` in the first
   1,024 bytes (html5lib's prescan); for XML types the ``<?xml encoding=...?>`` declaration.
4. UTF-8, when the bytes are UTF-8 (a handful of broken sequences in a long UTF-8 page still
   counts: one stray byte must not turn a whole page into mojibake).
5. For HTML, a meta declaration later in the document (browsers re-decode when the parser meets
   one).
6. For a body that declares nothing anywhere, statistical detection (charset-normalizer) over
   64 KB from its first non-ASCII byte, among the legacy encodings browsers read: a Shift_JIS,
   windows-1251 or GBK page then reads right. windows-1252 wins when it is among the candidates
   with nearly the best score: a detector's first guess for Western European text is often a
   Baltic or Central European code page that turns "île" into "īle".
7. windows-1252, the web's default for undeclared legacy pages.

A label that cannot be read (unknown, not ASCII, or "replacement", which browsers refuse to
decode) is ignored and the next step decides. Labels map to codecs through the WHATWG Encoding
Standard's table (webencodings), so ``latin1`` is windows-1252, ``gb2312`` is GBK, ``shift_jis``
is Windows-31J, as a browser would read them; x-user-defined, which has no Python codec, reads
as windows-1252.

``choose`` is bounded (a UTF-8 check that stops as soon as the verdict is settled, detection on
64 KB) and ``decode_pieces`` decodes 64 KB at a time, so the caller can yield between pieces.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import charset_normalizer
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
_META_CHARSET = re.compile(
    rb"<meta[^>]{0,300}?charset\s*=\s*[\"']?\s*([A-Za-z0-9._:\-]{1,40})", re.IGNORECASE
)
_PRESCAN_BYTES = 1024
_LATE_META_BYTES = 65536
_MAX_LABEL = 64
# UTF-8 that is mostly valid is UTF-8: legacy text almost never forms valid multi-byte sequences,
# so twenty good non-ASCII characters for each broken one is far beyond chance.
_UTF8_GOOD_PER_BAD = 20
_PIECE_BYTES = 65536
_DETECT_BYTES = 65536
_DETECT_CONTEXT = 1024  # ASCII bytes before the first non-ASCII one, given to the detector too
# Where detection starts: the first byte that is not ASCII.
_HIGH_BYTE = re.compile(rb"[\x80-\xff]")
_ISO_2022_JP = re.compile(rb"\x1b(?:\$[@B]|\(J)")
# windows-1252 wins against a best guess whose mess ratio is at most this much lower.
_NEARLY_AS_GOOD = 0.02
_WINDOWS_1252 = "cp1252"


@dataclass(frozen=True)
class Choice:
    codec: str  # the Python codec
    source: str  # "bom", "header", "meta", "xml", "utf-8", "late-meta", "detected" or "default"
    skip: int = 0  # bytes of byte order mark before the text


@dataclass(frozen=True)
class Decoded:
    text: str
    encoding: str  # the Python codec used
    source: str


def codec_for(label: str | bytes | None) -> str | None:
    """The Python codec for a WHATWG encoding label, or None when the label cannot be used."""
    if label is None:
        return None
    if isinstance(label, bytes):
        try:
            label = label.decode("ascii")
        except UnicodeDecodeError:
            return None
    label = label.strip()
    # Every WHATWG label is short ASCII; anything else (a header's stray Latin-1 byte, which reaches
    # us as a lone surrogate) names nothing and would trip the label table's lower-casing.
    if not label.isascii() or len(label) > _MAX_LABEL:
        return None
    encoding = webencodings.lookup(label)
    # "replacement" covers ISO-2022-KR, HZ and the like, which browsers refuse to decode (they were
    # used to smuggle markup past filters); the next step of the order decides instead.
    if encoding is None or encoding.name == "replacement":
        return None
    if encoding.name == "x-user-defined":
        return _WINDOWS_1252
    codec: str = _WIDER_CODEC.get(encoding.name, encoding.codec_info.name)
    return codec


def choose(body: bytes, header_charset: str | None, flavor: Flavor) -> Choice:
    """The codec the body is read with, and which step of the order chose it."""
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return Choice(codec, "bom", len(bom))
    header_codec = codec_for(header_charset)
    if header_codec is not None:
        return Choice(header_codec, "header")
    if flavor == "xml":
        match = _XML_DECLARATION.match(body[:_PRESCAN_BYTES])
        declared = codec_for(match.group(1)) if match else None
        if declared is not None and not declared.startswith("utf-16"):
            return Choice(declared, "xml")
    if flavor in ("html", "xml"):
        declared = _meta_codec(body[:_PRESCAN_BYTES])
        if declared is not None:
            return Choice(declared, "meta")
    if _ISO_2022_JP.search(body, 0, _DETECT_BYTES) and _HIGH_BYTE.search(body) is None:
        # Seven-bit Japanese: valid ASCII, so the UTF-8 step would take it, but its escapes
        # (ESC $ B...) never occur in text.
        return Choice("iso2022_jp", "detected")
    if _mostly_utf8(body):
        return Choice("utf-8", "utf-8")
    if flavor == "html":
        declared = _late_meta_codec(body)
        if declared is not None:
            return Choice(declared, "late-meta")
    detected = _detect(body)
    if detected is not None:
        return Choice(detected, "detected")
    return Choice(_WINDOWS_1252, "default")


def decode_pieces(body: bytes, choice: Choice) -> Iterator[str]:
    """The body's text, 64 KB of bytes at a time; bytes the codec cannot read become U+FFFD,
    except a character cut off at the very end (the body may have been cut at the byte cap)."""
    decoder = codecs.getincrementaldecoder(choice.codec)(errors="replace")
    for start in range(choice.skip, len(body), _PIECE_BYTES):
        yield decoder.decode(body[start : start + _PIECE_BYTES], final=False)


def decode(body: bytes, header_charset: str | None, flavor: Flavor) -> Decoded:
    """The whole body in one call (tests, benchmarks)."""
    choice = choose(body, header_charset, flavor)
    return Decoded("".join(decode_pieces(body, choice)), choice.codec, choice.source)


def _meta_codec(head: bytes) -> str | None:
    found = EncodingParser(head).getEncoding()
    if found is None:
        return None
    # The HTML standard: a page cannot declare UTF-16 from inside itself (the bytes it was read with
    # to find the meta were ASCII-compatible), so such a meta means UTF-8.
    if found.name in ("utf-16be", "utf-16le"):
        return "utf-8"
    return codec_for(found.name)


def _late_meta_codec(body: bytes) -> str | None:
    match = _META_CHARSET.search(body, 0, _LATE_META_BYTES)
    if match is None:
        return None
    codec = codec_for(match.group(1))
    if codec is None or codec.startswith("utf-16") or codec == "utf-8":
        return None
    return codec


def _mostly_utf8(body: bytes) -> bool:
    # A body cut at the byte cap can end inside a character; that tail is not a reason to doubt it.
    try:
        codecs.getincrementaldecoder("utf-8")("strict").decode(body, final=False)
        return True
    except UnicodeDecodeError:
        pass
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    good = bad = 0
    for start in range(0, len(body), _PIECE_BYTES):
        piece = body[start : start + _PIECE_BYTES]
        text = decoder.decode(piece, final=False)
        bad += text.count("\ufffd") - piece.count(b"\xef\xbf\xbd")
        good += len(text) - len(text.encode("ascii", errors="ignore"))
        # Stop once the rest of the body could not bring the ratio back (each good character
        # takes at least two bytes): a legacy page is settled in its first piece.
        best_good = good + (len(body) - start - len(piece)) // 2
        if best_good < _UTF8_GOOD_PER_BAD * max(bad, 1):
            return False
    return good >= _UTF8_GOOD_PER_BAD * max(bad, 1)


def _web_codecs() -> list[str]:
    """The single- and multi-byte legacy encodings of the WHATWG table, as Python codec names."""
    names = {codec_for(name) for name in set(webencodings.LABELS.values())} - {None, "utf-8"}
    legacy = {name for name in names if name is not None and not name.startswith("utf-16")}
    return sorted(codecs.lookup(name).name.replace("-", "_") for name in legacy)


_CANDIDATES = _web_codecs()


def _detect(body: bytes) -> str | None:
    first = _HIGH_BYTE.search(body)
    if first is None:
        return None  # plain ASCII: every candidate reads it alike
    start = max(0, first.start() - _DETECT_CONTEXT)
    matches = charset_normalizer.from_bytes(
        body[start : start + _DETECT_BYTES], cp_isolation=_CANDIDATES, preemptive_behaviour=False
    )
    best = matches.best()
    if best is None:
        return None
    for match in matches:
        if match.chaos <= best.chaos + _NEARLY_AS_GOOD and _WINDOWS_1252 in (
            match.encoding,
            *match.could_be_from_charset,
        ):
            return _WINDOWS_1252
    codec: str = best.encoding
    return codec
