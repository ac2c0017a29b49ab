"""The metadata being built: each field takes the first clean value offered, with its source.

Precedence is the order of the ``offer`` calls (page.py and pdf.py, documented in
docs/metadata.md); a value that is empty after cleaning, or is no plausible date, offers nothing
and the next declaration gets its turn.
"""

from __future__ import annotations

from jobs.reader.metadata import values
from jobs.reader.metadata.dates import WEB_FLOOR, iso_date
from worker.page_metadata import PageMetadata, empty

CAPS = {
    "headline": values.MAX_HEADLINE,
    "site_name": values.MAX_SITE_NAME,
    "description": values.MAX_DESCRIPTION,
}


class Builder:
    def __init__(self, *, date_floor: int = WEB_FLOOR) -> None:
        self.metadata: PageMetadata = empty()
        self.cleaner = values.Cleaner()
        self._floor = date_floor

    @property
    def hidden_removed(self) -> int:
        return self.cleaner.removed

    def has(self, name: str) -> bool:
        if name == "author":
            return bool(self.metadata["author"])
        return self.metadata[name] is not None  # type: ignore[literal-required]

    def text(self, name: str, raw: str | None, source: str) -> None:
        """headline, site_name, description."""
        if raw is None or self.has(name):
            return
        cleaned = self.cleaner.text(raw, CAPS[name])
        if cleaned is not None:
            self._set(name, cleaned, source)

    def date(self, name: str, raw: str | None, source: str) -> None:
        """published, modified."""
        if raw is None or self.has(name):
            return
        found = iso_date(self.cleaner.text(raw, 200), floor=self._floor)
        if found is not None:
            self._set(name, found, source)

    def language(self, raw: str | None, source: str) -> None:
        if raw is not None and not self.has("language"):
            found = values.language(self.cleaner.text(raw, 64))
            if found is not None:
                self._set("language", found, source)

    def doi(self, raw: str | None, source: str) -> None:
        if raw is not None and not self.has("doi"):
            found = values.doi(self.cleaner.text(raw, values.MAX_DOI))
            if found is not None:
                self._set("doi", found, source)

    def kind(self, raw: str | None, source: str) -> None:
        if raw is not None and not self.has("type"):
            found = values.kind(self.cleaner.text(raw, values.MAX_TYPE))
            if found is not None:
                self._set("type", found, source)

    def url(self, canonical: str | None, source: str) -> None:
        """An already canonical https URL (page.py resolves and checks it)."""
        if canonical is not None and not self.has("canonical_url"):
            self._set("canonical_url", canonical, source)

    def authors(self, raw: list[str], source: str, *, split: bool = False) -> None:
        if raw and not self.has("author"):
            names = self.cleaner.authors(raw, split=split)
            if names:
                self.metadata["author"] = names
                self.metadata["sources"]["author"] = source

    def _set(self, name: str, value: str, source: str) -> None:
        self.metadata[name] = value  # type: ignore[literal-required]
        self.metadata["sources"][name] = source
