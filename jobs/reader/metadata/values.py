"""Page-written strings made into bounded, clean values: metadata is hostile data like the text.

Every string loses its invisible and control characters (hidden.py's rules, counted), has its
whitespace collapsed and is cut to a cap; a value that is empty after that is no value.
"""

from __future__ import annotations

import re

from jobs.reader.hidden import strip_invisible

MAX_AUTHOR = 200
MAX_AUTHORS = 20
MAX_DESCRIPTION = 1000
MAX_HEADLINE = 500
MAX_SITE_NAME = 200
MAX_TYPE = 64
MAX_DOI = 200
# What is looked at before cleaning: a 2 MiB "author" costs no more than a short one.
MAX_RAW = 4 * MAX_DESCRIPTION

_LANGUAGE = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8}){0,6}")
_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_.:/-]*")
_DOI = re.compile(r"(10\.\d{4,9}/\S+)")
_DOI_PREFIX = re.compile(r"^(?:doi:\s*|https?://(?:dx\.)?doi\.org/)", re.IGNORECASE)
_URLISH = re.compile(r"^(?:https?:|www\.|//)|@[\w.-]+\.\w+$|^@", re.IGNORECASE)
_BY = re.compile(r"^(?:by|von|par|por|door|di)\s+", re.IGNORECASE)
_SEMICOLON = re.compile(r"\s*[;|]\s*")
_AND = re.compile(r"\s*&\s*|\s+(?:and|und|y|et)\s+", re.IGNORECASE)
_PARTICLES = frozenset({"de", "da", "di", "van", "von", "der", "den", "la", "le", "du", "del", "bin", "al"})
# "Tom Krisher, AP Auto Writer": the part after the comma is the writer's job, not a second writer.
_ROLE = re.compile(
    r"\b(?:writer|correspondent|editor|reporter|columnist|contributor|journalist|staff|producer)s?\b",
    re.IGNORECASE,
)
_NOT_A_NAME = re.compile(r"^(?:\u00a9|\(c\)|copyright\b)", re.IGNORECASE)


class Cleaner:
    """Cleans values and counts the invisible characters it removed (for ``hidden_removed``)."""

    def __init__(self) -> None:
        self.removed = 0

    def text(self, raw: object, cap: int) -> str | None:
        if not isinstance(raw, str):
            return None
        stripped, removed = strip_invisible(raw[:MAX_RAW])
        self.removed += removed
        text = " ".join(stripped.split())[:cap].strip()
        return text or None

    def authors(self, raw: list[str], *, split: bool = False) -> list[str]:
        """Distinct names, at most MAX_AUTHORS; URLs, handles and e-mail addresses are not names."""
        names: list[str] = []
        seen: set[str] = set()
        for value in raw[: 4 * MAX_AUTHORS]:
            text = self.text(value, 4 * MAX_AUTHOR)
            if text is None:
                continue
            for part in split_names(text) if split else [text]:
                name = _BY.sub("", part).strip(" ,.-")[:MAX_AUTHOR].strip()
                if (
                    not name
                    or _URLISH.search(name)
                    or _NOT_A_NAME.match(name)
                    or not any(c.isalpha() for c in name)
                ):
                    continue
                if name.casefold() not in seen:
                    seen.add(name.casefold())
                    names.append(name)
                if len(names) == MAX_AUTHORS:
                    return names
        return names


def split_names(text: str) -> list[str]:
    """ "Jane Doe; John Roe", "Jane Doe, John Roe" and "Jane Doe and John Roe" are two names; "Doe,
    Jane" is one, and so are "Jobs & Hire" and "Ministry of Trade and Industry": a comma splits
    only between parts of two words or more, an "and" only between parts that read as people's
    names (two to four capitalised words)."""
    names: list[str] = []
    for part in (part.strip() for part in _SEMICOLON.split(text) if part.strip()):
        pieces = [piece.strip() for piece in part.split(",") if piece.strip()]
        if len(pieces) > 1 and all(len(piece.split()) >= 2 for piece in pieces):
            pieces = [pieces[0], *(piece for piece in pieces[1:] if not _ROLE.search(piece))]
        else:
            pieces = [part]
        for piece in pieces:
            people = [name.strip() for name in _AND.split(piece) if name.strip()]
            names.extend(people if len(people) > 1 and all(map(_a_persons_name, people)) else [piece])
    return names


def _a_persons_name(text: str) -> bool:
    words = text.split()
    return 2 <= len(words) <= 4 and all(word[0].isupper() or word.lower() in _PARTICLES for word in words)


def last_first(name: str) -> str:
    """Highwire's "Doe, Jane" as "Jane Doe"."""
    family, comma, given = name.partition(",")
    if comma and given.strip() and "," not in given and family.strip():
        return f"{given.strip()} {family.strip()}"
    return name


def language(raw: str | None) -> str | None:
    """A BCP 47 tag in its usual case (en, en-US, zh-Hant-TW), or None; og:locale's "en_US" reads too."""
    if raw is None:
        return None
    candidate = raw.strip().replace("_", "-")
    if not _LANGUAGE.fullmatch(candidate):
        return None
    parts = candidate.split("-")
    out = [parts[0].lower()]
    for part in parts[1:]:
        if len(part) == 2 and part.isalpha():
            out.append(part.upper())
        elif len(part) == 4 and part.isalpha():
            out.append(part.title())
        else:
            out.append(part.lower())
    return "-".join(out)


def doi(raw: str | None) -> str | None:
    """The bare DOI in ``raw`` ("doi:10.1/x", "https://doi.org/10.1/x"), or None."""
    if raw is None:
        return None
    match = _DOI.match(_DOI_PREFIX.sub("", raw.strip()))
    if match is None:
        return None
    return match.group(1).rstrip(".,;")[:MAX_DOI]


def kind(raw: str | None) -> str | None:
    """A declared type name ("article", "NewsArticle"); anything else is not one."""
    if raw is None:
        return None
    text = raw.strip()
    if text.startswith(("http://schema.org/", "https://schema.org/")):
        text = text.rsplit("/", 1)[1]
    return text if len(text) <= MAX_TYPE and _TYPE.fullmatch(text) else None
