"""A small PDF writer for tests: pages of text, rectangles, images and links, written by hand.

Hand-written so a test can say exactly what a hostile PDF holds (text in render mode 3, white
text on nothing, text off the page, a bomb of a content stream, a broken cross-reference table)
without depending on what a PDF library would refuse to write. Text uses the standard Helvetica
font with WinAnsiEncoding, so its characters must be Latin-1.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

Color = tuple[float, float, float]
BLACK: Color = (0.0, 0.0, 0.0)
WHITE: Color = (1.0, 1.0, 1.0)
LETTER = (0.0, 0.0, 612.0, 792.0)
MIB = 1024 * 1024


@dataclass(frozen=True)
class Text:
    x: float
    y: float
    text: str
    size: float = 12.0
    color: Color = BLACK
    mode: int = 0  # the text render mode: 0 fill, 3 invisible, 7 clip only
    font: str = "F1"  # F2 maps the bytes 1..4 to invisible characters (see FORMAT_CHARACTERS)
    alpha: float = 1.0  # its opacity (fill and stroke), through an ExtGState


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    width: float
    height: float
    color: Color = BLACK
    outline_only: bool = False  # stroked in its colour, not filled: a frame around nothing
    alpha: float = 1.0  # its opacity, through an ExtGState


@dataclass(frozen=True)
class Picture:
    """An image scaled to the box. By default a 32x32 grey pattern that varies from pixel to pixel
    (what a scanner puts on a page: words everywhere); with ``color``, a blank 1x1 image of that
    colour, stretched (a white page or a flat box that happens to be an image)."""

    x: float
    y: float
    width: float
    height: float
    color: Color | None = None


@dataclass(frozen=True)
class Link:
    rect: tuple[float, float, float, float]
    uri: str | None = None  # a URI action
    javascript: str | None = None  # a JavaScript action instead


@dataclass(frozen=True)
class Form:
    """A form XObject holding ``items``, drawn through ``matrix`` (form space to page space)."""

    items: Sequence[Item]
    matrix: tuple[float, float, float, float, float, float] = (1, 0, 0, 1, 0, 0)


@dataclass(frozen=True)
class Shade:
    """A box painted with a shading (a grey gradient, the ``sh`` operator): a picture, not a fill."""

    x: float
    y: float
    width: float
    height: float


Item = Text | Rect | Picture | Shade | Form


@dataclass
class Page:
    items: Sequence[Item] = ()
    links: Sequence[Link] = ()
    media_box: tuple[float, float, float, float] = LETTER
    crop_box: tuple[float, float, float, float] | None = None
    deflated: Sequence[bytes] = ()  # more content streams, already deflated, drawn after the items


# A scan's pixels: dark and light alternating from each pixel to the next, so every part of the
# picture, however small, shows something.
SCAN_PIXELS = bytes(0x30 if (x + y) % 2 else 0xD0 for y in range(32) for x in range(32))

# What font F2's bytes 1..4 stand for: a zero-width space, a right-to-left override, the tag
# letter A, a word joiner. Every other byte is itself (printable ASCII).
FORMAT_CHARACTERS = {"\x01": "\u200b", "\x02": "\u202e", "\x03": "\U000e0041", "\x04": "\u2060"}
_TO_UNICODE = b"""/CIDInit /ProcSet findresource begin 12 dict begin begincmap
/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def
/CMapName /Tests-UCS def /CMapType 2 def
1 begincodespacerange <00> <FF> endcodespacerange
4 beginbfchar <01> <200B> <02> <202E> <03> <DB40DC41> <04> <2060> endbfchar
1 beginbfrange <20> <7E> <0020> endbfrange
endcmap CMapName currentdict /CMap defineresource pop end end"""


@dataclass
class _Writer:
    objects: list[bytes] = field(default_factory=list)

    def reserve(self) -> int:
        self.objects.append(b"")
        return len(self.objects)

    def put(self, number: int, body: bytes) -> int:
        self.objects[number - 1] = body
        return number

    def add(self, body: bytes) -> int:
        return self.put(self.reserve(), body)

    def stream(self, data: bytes, extra: bytes = b"", compress: bool = False) -> int:
        if compress:
            data = zlib.compress(data, 9)
            extra += b" /Filter /FlateDecode"
        return self.add(b"<< /Length %d%s >>\nstream\n" % (len(data), extra) + data + b"\nendstream")

    def finish(self, root: int, info: int | None) -> bytes:
        out = io.BytesIO()
        out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
        offsets = []
        for number, body in enumerate(self.objects, start=1):
            offsets.append(out.tell())
            out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
        xref = out.tell()
        out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(self.objects) + 1))
        for offset in offsets:
            out.write(b"%010d 00000 n \n" % offset)
        trailer = b"/Size %d /Root %d 0 R" % (len(self.objects) + 1, root)
        if info is not None:
            trailer += b" /Info %d 0 R" % info
        out.write(b"trailer\n<< " + trailer + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref)
        return out.getvalue()


def pdf_string(text: str) -> bytes:
    """A literal string in WinAnsi (Latin-1 here), with the three special characters escaped."""
    raw = text.encode("latin-1")
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def text_string(text: str) -> bytes:
    """A text string (metadata) in UTF-16BE with its byte-order mark, as hex: any character at all."""
    return b"<" + ("\ufeff" + text).encode("utf-16-be").hex().encode() + b">"


def _rgb(color: Color) -> bytes:
    return b"%.3f %.3f %.3f" % color


class _Contents:
    """Content streams for one document; each form met on the way becomes an XObject /FmN."""

    def __init__(self, writer: _Writer, resources: int, compress: bool) -> None:
        self.writer = writer
        self.resources = resources
        self.compress = compress
        self.forms: list[int] = []
        self.blanks: list[int] = []  # 1x1 images, one per Picture with a colour: /Blank1, /Blank2...
        self.opacities: list[float] = []  # ExtGStates, one per opacity other than 1: /GS1, /GS2...

    def translucent(self, operators: bytes, alpha: float) -> bytes:
        """``operators`` painted at opacity ``alpha`` (unchanged at 1)."""
        if alpha == 1.0:
            return operators
        if alpha not in self.opacities:
            self.opacities.append(alpha)
        return b"q /GS%d gs %s Q" % (self.opacities.index(alpha) + 1, operators)

    def blank(self, color: Color) -> int:
        pixel = bytes(round(channel * 255) for channel in color)
        self.blanks.append(
            self.writer.stream(
                pixel,
                b" /Type /XObject /Subtype /Image /Width 1 /Height 1"
                b" /ColorSpace /DeviceRGB /BitsPerComponent 8",
            )
        )
        return len(self.blanks)

    def stream(self, items: Sequence[Item]) -> int:
        return self.writer.stream(self.operators(items), compress=self.compress)

    def operators(self, items: Sequence[Item]) -> bytes:
        ops: list[bytes] = []
        for item in items:
            if isinstance(item, Text):
                text = b"BT /%s %.2f Tf %d Tr %s rg %s RG %.2f %.2f Td %s Tj ET" % (
                    item.font.encode(),
                    item.size,
                    item.mode,
                    _rgb(item.color),
                    _rgb(item.color),
                    item.x,
                    item.y,
                    pdf_string(item.text),
                )
                ops.append(self.translucent(text, item.alpha))
            elif isinstance(item, Rect):
                paint = b"RG" if item.outline_only else b"rg"
                operator = b"S" if item.outline_only else b"f"
                rect = b"%s %s %.2f %.2f %.2f %.2f re %s" % (
                    _rgb(item.color),
                    paint,
                    item.x,
                    item.y,
                    item.width,
                    item.height,
                    operator,
                )
                ops.append(self.translucent(rect, item.alpha))
            elif isinstance(item, Shade):
                ops.append(
                    b"q %.2f %.2f %.2f %.2f re W n /Sh1 sh Q" % (item.x, item.y, item.width, item.height)
                )
            elif isinstance(item, Picture):
                name = b"Im1" if item.color is None else b"Blank%d" % self.blank(item.color)
                ops.append(
                    b"q %.2f 0 0 %.2f %.2f %.2f cm /%s Do Q" % (item.width, item.height, item.x, item.y, name)
                )
            else:
                ops.append(b"/Fm%d Do" % self.form(item))
        return b"\n".join(ops)

    def form(self, form: Form) -> int:
        data = self.operators(form.items)
        number = self.writer.stream(
            data,
            b" /Type /XObject /Subtype /Form /BBox [-10000 -10000 10000 10000] /Matrix [%s] /Resources %d 0 R"
            % (b" ".join(b"%.4f" % value for value in form.matrix), self.resources),
        )
        self.forms.append(number)
        return len(self.forms)


def _link(writer: _Writer, link: Link) -> int:
    if link.uri is not None:
        action = b"<< /S /URI /URI %s >>" % pdf_string(link.uri)
    else:
        action = b"<< /S /JavaScript /JS %s >>" % pdf_string(link.javascript or "")
    return writer.add(
        b"<< /Type /Annot /Subtype /Link /Rect [%.2f %.2f %.2f %.2f] /Border [0 0 0] /A %s >>"
        % (*link.rect, action)
    )


def _box(name: bytes, box: tuple[float, float, float, float]) -> bytes:
    return b" /%s [%.2f %.2f %.2f %.2f]" % (name, *box)


def build_pdf(
    pages: Sequence[Page],
    *,
    title: str | None = None,
    compress: bool = False,
    info: dict[str, str] | None = None,
    xmp: bytes | None = None,
) -> bytes:
    """A complete PDF of ``pages``, each with its own content stream (deflated with ``compress``)."""
    writer = _Writer()
    catalog = writer.reserve()
    tree = writer.reserve()
    font = writer.add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    image = writer.stream(
        SCAN_PIXELS,
        b" /Type /XObject /Subtype /Image /Width 32 /Height 32 /ColorSpace /DeviceGray /BitsPerComponent 8",
    )
    cmap = writer.stream(_TO_UNICODE)
    font2 = writer.add(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding /ToUnicode %d 0 R >>"
        % cmap
    )
    resources = writer.reserve()
    contents = _Contents(writer, resources, compress)
    shared: dict[bytes, int] = {}
    kids = []
    for page in pages:
        content = b"%d 0 R" % contents.stream(page.items)
        if page.deflated:
            more = []
            for data in page.deflated:
                # A stream given more than once is written once and referred to each time.
                if data not in shared:
                    shared[data] = writer.stream(data, b" /Filter /FlateDecode")
                more.append(shared[data])
            content = b"[" + b" ".join([content, *(b"%d 0 R" % number for number in more)]) + b"]"
        annots = b""
        if page.links:
            refs = b" ".join(b"%d 0 R" % _link(writer, link) for link in page.links)
            annots = b" /Annots [" + refs + b"]"
        crop = _box(b"CropBox", page.crop_box) if page.crop_box else b""
        kids.append(
            writer.add(
                b"<< /Type /Page /Parent %d 0 R%s%s /Resources %d 0 R /Contents %s%s >>"
                % (tree, _box(b"MediaBox", page.media_box), crop, resources, content, annots)
            )
        )
    forms = b"".join(b" /Fm%d %d 0 R" % (n, ref) for n, ref in enumerate(contents.forms, start=1))
    forms += b"".join(b" /Blank%d %d 0 R" % (n, ref) for n, ref in enumerate(contents.blanks, start=1))
    states = b"".join(
        b" /GS%d << /Type /ExtGState /ca %.3f /CA %.3f >>" % (n, alpha, alpha)
        for n, alpha in enumerate(contents.opacities, start=1)
    )
    writer.put(
        resources,
        b"<< /Font << /F1 %d 0 R /F2 %d 0 R >> /XObject << /Im1 %d 0 R%s >> /ExtGState <<%s >>"
        b" /Shading << /Sh1 << /ShadingType 2 /ColorSpace /DeviceGray /Coords [0 0 612 792]"
        b" /Function << /FunctionType 2 /Domain [0 1] /C0 [0] /C1 [1] /N 1 >> >> >> >>"
        % (font, font2, image, forms, states),
    )
    refs = b" ".join(b"%d 0 R" % kid for kid in kids)
    writer.put(tree, b"<< /Type /Pages /Kids [" + refs + b"] /Count %d >>" % len(kids))
    # An XMP packet is a plain stream named by the catalog, left uncompressed as the standard asks.
    metadata = b" /Metadata %d 0 R" % writer.stream(xmp, b" /Type /Metadata /Subtype /XML") if xmp else b""
    writer.put(catalog, b"<< /Type /Catalog /Pages %d 0 R%s >>" % (tree, metadata))
    entries = {**({"Title": title} if title is not None else {}), **(info or {})}
    declared = b"".join(b" /%s %s" % (key.encode(), text_string(value)) for key, value in entries.items())
    number = writer.add(b"<<%s /Producer (tests) >>" % declared) if entries else None
    return writer.finish(catalog, number)


def text_pdf(*paragraphs: str, title: str | None = None) -> bytes:
    """One page per paragraph, each written as one line near the top of the page."""
    return build_pdf([Page([Text(72, 700, paragraph)]) for paragraph in paragraphs], title=title)


def image_only_pdf(pages: int = 2) -> bytes:
    """What a scanner without OCR makes: each page is one picture and no text at all."""
    return build_pdf([Page([Picture(0, 0, 612, 792)]) for _ in range(pages)])


def many_pages_pdf(count: int, words: str = "Lorem ipsum dolor sit amet") -> bytes:
    """``count`` pages, each page its own number and a line of words, with compressed contents."""
    pages = [Page([Text(72, 700, f"Page {n}."), Text(72, 680, words)]) for n in range(1, count + 1)]
    return build_pdf(pages, compress=True)


def deflated(block: bytes, times: int) -> bytes:
    """``block`` repeated ``times`` times as one zlib stream, built without compressing it all.

    After a full flush deflate forgets what came before, so every block compresses to the same
    bytes: one compressed block is repeated, and the checksum is worked out arithmetically. A
    2 GiB bomb takes milliseconds to build instead of seconds.
    """
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflate.compress(block)
    deflate.flush(zlib.Z_FULL_FLUSH)
    again = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    end = deflate.flush()
    return b"\x78\xda" + again * times + end + _repeated_adler32(block, times).to_bytes(4, "big")


def _repeated_adler32(block: bytes, times: int) -> int:
    # Adler-32 keeps two sums: A (1 + the bytes) and B (the sum of every A). One block moves A by
    # the block's byte sum and B by len(block) * A plus the block's own B from zero.
    modulus = 65521
    from_zero = zlib.adler32(block, 0)
    block_a, block_b = from_zero & 0xFFFF, from_zero >> 16
    a, b = 1, 0
    for _ in range(times):
        a, b = (a + block_a) % modulus, (b + len(block) * a + block_b) % modulus
    return (b << 16) | a


def bomb_pdf(inflated_mib: int) -> bytes:
    """One page whose content stream is about inflated_mib/1000 MiB of deflate that inflates to
    ``inflated_mib`` MiB of spaces (deflate's best ratio is about 1,000 to 1)."""
    return build_pdf(
        [Page([Text(72, 700, "Before the bomb.")], deflated=[deflated(b" " * MIB, inflated_mib)])]
    )


def busy_pdf(pages: int, mib: int) -> bytes:
    """``pages`` pages, each a line of text and then ``mib`` MiB of dash-pattern operators: cheap
    in memory, costly to parse (about 20 ms of PDFium's CPU time per MiB here)."""
    operators = b"[1 2 3] 0 d " * 87_381  # 1 MiB, less 4 bytes
    burner = deflated(operators, mib)
    return build_pdf(
        [Page([Text(72, 700, f"Busy page {n}.")], deflated=[burner]) for n in range(1, pages + 1)]
    )


def costly_small_pdf(references: int = 150) -> bytes:
    """A PDF of a few KB that costs PDFium seconds: one page whose contents are one deflated MiB of
    dash-pattern operators, referred to ``references`` times (about 20 ms of parsing each)."""
    burner = deflated(b"[1 2 3] 0 d " * 87_381, 1)
    return build_pdf([Page([Text(72, 700, "A costly page.")], deflated=[burner] * references)])


def encrypted(pdf: bytes, password: str) -> bytes:
    """``pdf`` encrypted with AES-256 under a user password (pypdf, from the dev extra)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
