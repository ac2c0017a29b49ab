"""An office file's zip, checked before any library opens it: bombs, entities, macros, links out.

DOCX, XLSX, PPTX and the OpenDocument formats are zip archives of XML. Every check here reads the
zip's own directory and the XML members themselves, before python-docx, openpyxl, python-pptx or
odfpy sees a byte:

- a member that declares more than ``MAX_RATIO`` times its compressed size (past a small floor),
  more than ``MAX_MEMBER_BYTES``, or members that add up past ``MAX_TOTAL_BYTES`` is a zip bomb,
  refused; zipfile stops a member at its declared size and checks its CRC, so a member that lies
  about its size cannot inflate past what was checked;
- an XML member with a document type declaration (where entities are declared: the "billion
  laughs") is refused, found by defusedxml's parser, which refuses DTDs;
- a macro project (``vbaProject.bin``, OpenDocument ``Basic/`` or ``Scripts/``) is ignored and named;
- an external reference (an image, template, OLE object or frame linked by URL, an INCLUDEPICTURE
  or INCLUDETEXT field, an OpenDocument ``xlink:href`` to another file) is never followed and is
  named. Hyperlinks are what a reader clicks, not what a program loads: they are not hazards.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass, field
from xml.etree.ElementTree import ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

MAX_MEMBERS = 10_000
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 200 * 1024 * 1024
MAX_RATIO = 100
RATIO_FLOOR_BYTES = 1024 * 1024  # a small member may compress well: XML of repeated cells does
MAX_HAZARDS = 20

_RELATIONSHIP = re.compile(rb"<Relationship\b[^>]*>", re.IGNORECASE)
_EXTERNAL = re.compile(rb'TargetMode\s*=\s*"External"', re.IGNORECASE)
_TYPE = re.compile(rb'Type\s*=\s*"[^"]*/([A-Za-z]+)"')
_TARGET = re.compile(rb'Target\s*=\s*"([^"]{0,200})')
# A field code that loads something: in a w:instrText run, or a w:fldSimple's instr attribute.
_FIELD = re.compile(rb'instr(?:Text\b[^>]*>|\s*=\s*")\s*(INCLUDEPICTURE|INCLUDETEXT|LINK|DDEAUTO|DDE)\b')
# An OpenDocument frame's content (an image, an object, a plugin) taken from another file or a URL.
_ODF_LINK = re.compile(
    rb'<draw:(?:image|object|object-ole|plugin|applet)\b[^>]*?xlink:href\s*=\s*"'
    rb'((?:https?|ftp|file|smb|\.\./|/)[^"]{0,200})',
    re.IGNORECASE,
)
_MACROS = re.compile(r"(^|/)vbaProject\.bin$|^Basic/|^Scripts/", re.IGNORECASE)


class OfficeRefused(Exception):
    def __init__(self, hazard: str, detail: str) -> None:
        super().__init__(f"{hazard}: {detail}")
        self.hazard = hazard
        self.detail = detail


@dataclass
class Checked:
    """The zip, every member within bounds and free of DTDs, and what was found and ignored."""

    archive: zipfile.ZipFile
    names: set[str]
    hazards: list[str] = field(default_factory=list)

    def note(self, hazard: str) -> None:
        if len(self.hazards) < MAX_HAZARDS and hazard not in self.hazards:
            self.hazards.append(hazard)


def check(body: bytes) -> Checked:
    """Raise OfficeRefused("zip_bomb" | "xml_entities" | "damaged", ...) for a file not to open."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(body))
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as error:
        raise OfficeRefused("damaged", f"not a readable zip archive ({error})") from None
    if len(members) > MAX_MEMBERS:
        raise OfficeRefused("zip_bomb", f"{len(members):,} members, over the bound of {MAX_MEMBERS:,}")
    total = 0
    for member in members:
        size, packed = member.file_size, max(1, member.compress_size)
        total += size
        if size > MAX_MEMBER_BYTES:
            raise OfficeRefused("zip_bomb", f"{member.filename[:100]} inflates to {size:,} bytes")
        if size > RATIO_FLOOR_BYTES and size / packed > MAX_RATIO:
            raise OfficeRefused(
                "zip_bomb", f"{member.filename[:100]} inflates {size / packed:,.0f} times (bound {MAX_RATIO})"
            )
    if total > MAX_TOTAL_BYTES:
        raise OfficeRefused("zip_bomb", f"its members inflate to {total:,} bytes in all")
    checked = Checked(archive, {member.filename for member in members})
    for member in members:
        _check_member(archive, member, checked)
    return checked


def _check_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, checked: Checked) -> None:
    name = member.filename
    if _MACROS.search(name):
        checked.note(f"macro: {name[:100]} was ignored")
        return
    if not name.lower().endswith((".xml", ".rels")):
        return
    try:
        data = archive.read(member)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as error:
        raise OfficeRefused("damaged", f"{name[:100]} cannot be read ({error})") from None
    try:
        fromstring(data, forbid_dtd=True)
    except DefusedXmlException:
        raise OfficeRefused("xml_entities", f"{name[:100]} declares a DTD or entities") from None
    except (ParseError, ValueError) as error:
        raise OfficeRefused("damaged", f"{name[:100]} is not well-formed XML ({error})") from None
    if name.endswith(".rels"):
        for relationship in _RELATIONSHIP.findall(data):
            if _EXTERNAL.search(relationship):
                kind = _TYPE.search(relationship)
                kind_name = kind.group(1).decode("ascii", "replace") if kind else "link"
                if kind_name.lower() != "hyperlink":
                    target = _TARGET.search(relationship)
                    shown = target.group(1).decode("utf-8", "replace") if target else ""
                    checked.note(f"external_reference: {kind_name} {shown} was not fetched")
    elif name.startswith("word/") and (found := _FIELD.search(data)):
        checked.note(f"external_reference: a {found.group(1).decode()} field was not followed")
    elif not name.startswith(("word/", "xl/", "ppt/", "docProps/", "[Content_Types]")):
        for link in _ODF_LINK.findall(data):
            checked.note(f"external_reference: {link.decode('utf-8', 'replace')} was not fetched")
