"""A page's headline without the site name its ``<title>`` (and often its og:title) carries.

"Rates rise again | The Daily Example", "The Daily Example - Rates rise again": the part that
names the site goes when the site is known (its declared name, or its host's name), and the
title's last part goes when it is short beside the rest, as a site's name is.
"""

from __future__ import annotations

import re

SEPARATORS = re.compile(r"\s+(?:[|\-\u2013\u2014\u00b7\u2022/:]|::|\u00bb|\u203a)\s+")
MAX_SUFFIX_WORDS = 4
MAX_SUFFIX_CHARS = 40


def without_site(title: str, site_name: str | None, host: str | None, *, guess: bool) -> str:
    """``title`` less a leading or trailing part that names the site; with ``guess``, also less a
    last part short beside the rest when the site's name is not known."""
    parts = SEPARATORS.split(title)
    if len(parts) < 2:
        return title
    names = [_folded(name) for name in (site_name,) if name] + _host_names(host)
    if names:
        if _names_site(parts[-1], names):
            return _rejoin(title, parts[:-1])
        if _names_site(parts[0], names):
            return _rejoin(title, parts[1:])
    last = parts[-1]
    rest = " ".join(parts[:-1])
    if (
        guess
        and site_name is None
        and len(last) <= MAX_SUFFIX_CHARS
        and len(last.split()) <= MAX_SUFFIX_WORDS < len(rest.split())
    ):
        return _rejoin(title, parts[:-1])
    return title


def _rejoin(title: str, kept: list[str]) -> str:
    """The kept parts as the title wrote them (with their own separators between)."""
    start = title.find(kept[0])
    end = title.rfind(kept[-1]) + len(kept[-1])
    return title[start:end].strip() if 0 <= start < end else " ".join(kept)


def _names_site(part: str, names: list[str]) -> bool:
    folded = _folded(part)
    return bool(folded) and any(
        folded == name or (len(name) >= 3 and (name in folded or folded in name)) for name in names
    )


def _host_names(host: str | None) -> list[str]:
    """ "www.example-news.co.uk" gives "examplenews": the label that names the site."""
    if not host:
        return []
    labels = [label for label in host.lower().split(".") if label not in ("www", "m", "amp")]
    if len(labels) >= 3 and len(labels[-2]) <= 3:
        labels = labels[:-2]  # co.uk, com.au
    elif len(labels) >= 2:
        labels = labels[:-1]
    return [_folded(label) for label in labels[-1:] if len(_folded(label)) >= 3]


def _folded(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


def same_headline(first: str, second: str) -> bool:
    """Whether two headlines say the same, case, spacing and punctuation aside."""
    return _folded(first) == _folded(second)


def contains(outer: str, inner: str) -> bool:
    folded = _folded(inner)
    return bool(folded) and folded in _folded(outer)
