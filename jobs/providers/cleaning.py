"""The one cleaning every provider's results go through before they reach a result, Redis or the menu.

A provider relays third-party text (titles and snippets written by whoever runs the page) and may
echo what it was sent, keys included. So, in this order:

1. invisible characters go first (zero-width, bidi controls, tag characters, variation selectors:
   the reader's own list, plus any other control, format or private-use character), so nothing a
   person would not see reaches the agent, and a key cannot hide from the masks behind one;
2. whitespace is collapsed to single spaces;
3. keys are masked, case-insensitively and across whitespace: every key this worker holds by its
   value, any long run of a held key's secret part (what follows ``sk-or-v1-``: a provider that
   echoes the 64 hex digits alone, or upper-cased, or half of them, echoes the key), and any
   OpenRouter-shaped key by its shape;
4. the text is cut (at a word boundary when one is near, marked with "…"). Only a bounded prefix is
   read at all, and where the text is cut no part of a key cut in two is kept.

A url is kept only when it is an absolute http(s) URL with a host, of a length a fetch accepts,
with nothing invisible in it and no key in it (percent-encoded or not): a url cannot be masked
without becoming a source that does not exist, so a citation that carries a key is dropped whole.
Urls are kept in the provider's order, cut at the job's ``max_results``, a url dropped when the
menu would take it for one already kept (the same canonical form: ``worker.guardian.urls``; other
spellings of the host's case, the default port, a fragment or the scheme's case are one source).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from jobs.reader.hidden import strip_invisible
from worker.archive.masking import held_secrets
from worker.config import Settings
from worker.guardian.urls import canonical_url
from worker.limits import MAX_URL_LENGTH
from worker.redact import SECRET_RUN, secret_run_spans
from worker.state.result_records import Citation

TITLE_MAX_CHARS = 300
SNIPPET_MAX_CHARS = 500
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn"})
# Whatever key a provider echoes, ours or another, it is masked by its shape too.
KEY_SHAPE = r"sk-or-[a-z0-9_\-]+"
MASK = "***"
SHAPE_MASK = "sk-or-***"
MIN_REACH = 64
# A run of SECRET_RUN (16) characters of a held key's secret part is masked wherever it appears: 64
# bits, which no page cites by chance, and a key cut in four still shows no piece.
# What comes before a key's secret part; the part after it is what a leak would show alone.
KEY_PREFIX = re.compile(r"^sk-or-(?:v\d+-)?", re.IGNORECASE)
# Text is read up to this many times what can be shown: past it, a snippet is cut unread.
RAW_FACTOR = 8


class Masker:
    """Masks the keys a worker holds in text a provider sent, however their case or spacing changed."""

    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so a key that contains another is masked whole. Whitespace may sit
        # between any two characters: collapsing a line break inside a key must not unmask it.
        values = sorted({secret for secret in secrets if secret}, key=len, reverse=True)
        ours = "|".join(r"\s*".join(re.escape(ch) for ch in value) for value in values)
        # One pattern, our keys first: where both could match, the key is masked whole.
        pattern = f"(?P<ours>{ours})|{KEY_SHAPE}" if ours else KEY_SHAPE
        self._keys = re.compile(pattern, re.IGNORECASE)
        # How far a key may reach past a point it starts before, once whitespace is collapsed.
        self.reach = max(2 * len(values[0]) if values else 0, MIN_REACH)
        self._runs = secret_runs(values)

    @classmethod
    def from_settings(cls, settings: Settings) -> Masker:
        """Every secret the worker holds: the default key, each organization's key, SearXNG's password."""
        return cls(held_secrets(settings))

    def mask(self, visible: str, *, upto: int | None = None) -> str:
        """``visible`` (already free of invisible characters) with every key masked.

        With ``upto``, only what starts before that index is kept: a key that starts before it is
        kept whole (as its mask), anything after it goes, a key cut in two by the text's end included.
        """
        end = len(visible) if upto is None else upto
        kept: list[str] = []
        at = 0
        for start, stop, mask in self._spans(visible):
            if start >= end:
                break
            kept.append(visible[at:start])
            kept.append(mask)
            at = stop
        kept.append(visible[at:end])
        return "".join(kept)

    def holds_key(self, visible: str) -> bool:
        return self._keys.search(visible) is not None or bool(self._run_spans(visible))

    def _spans(self, visible: str) -> list[tuple[int, int, str]]:
        """What to mask, in order, overlapping spans merged (ours wins over a shape's mask)."""
        found = [
            (m.start(), m.end(), MASK if m.lastgroup == "ours" else SHAPE_MASK)
            for m in self._keys.finditer(visible)
        ]
        found += [(start, stop, MASK) for start, stop in self._run_spans(visible)]
        found.sort()
        merged: list[tuple[int, int, str]] = []
        for start, stop, mask in found:
            if merged and start <= merged[-1][1]:
                last = merged[-1]
                merged[-1] = (last[0], max(last[1], stop), MASK if MASK in (mask, last[2]) else SHAPE_MASK)
            else:
                merged.append((start, stop, mask))
        return merged

    def _run_spans(self, visible: str) -> list[tuple[int, int]]:
        """Where a run of ``SECRET_RUN`` characters of a held secret part appears, whitespace aside."""
        if not self._runs:
            return []
        # The text without whitespace, lowered, and where each of its characters came from.
        where = [index for index, ch in enumerate(visible) if not ch.isspace()]
        return secret_run_spans("".join(visible[index] for index in where).lower(), where, self._runs)


def secret_runs(secrets: Iterable[str]) -> frozenset[str]:
    """Every ``SECRET_RUN``-character piece of each secret's part after its key prefix, lowered."""
    runs: set[str] = set()
    for secret in secrets:
        part = "".join(KEY_PREFIX.sub("", secret).split()).lower()
        runs.update(part[index : index + SECRET_RUN] for index in range(len(part) - SECRET_RUN + 1))
    return frozenset(runs)


def visible_text(value: str) -> str:
    """``value`` without invisible characters, whitespace kept for the caller to collapse."""
    text, _ = strip_invisible(value)
    if all(ch.isprintable() or ch.isspace() for ch in text):
        return text
    return "".join(ch for ch in text if ch.isspace() or unicodedata.category(ch) not in HIDDEN_CATEGORIES)


def plain_text(value: object, limit: int, masker: Masker) -> str:
    """Provider text made safe for a result: visible, keys masked, one line, at most ``limit`` chars."""
    if not isinstance(value, str):
        return ""
    # Only a bounded prefix is read, so a provider's megabyte of snippet costs a cut, not a pass of
    # every check over all of it.
    raw = value[: RAW_FACTOR * (limit + masker.reach)]
    text = " ".join(visible_text(raw).split())
    window = limit + masker.reach
    if len(raw) == len(value) and len(text) <= window:
        text = masker.mask(text)
        if len(text) <= limit:
            return text
    else:
        # Cut: a key that starts before the last ``reach`` characters lies whole in the window and
        # is masked; what starts after may be a key cut in two, and goes.
        text = masker.mask(text[:window], upto=max(0, min(len(text), window) - masker.reach))
    text = text[: limit - 1]
    space = text.rfind(" ")
    if space > limit // 2:
        text = text[:space]
    return text.rstrip() + "…"


def one_line(value: object, masker: Masker, limit: int = 200) -> str:
    """Provider text for a log line (never for a result): visible, keys masked, short."""
    return plain_text(value, limit, masker)


def usable_url(value: object, masker: Masker) -> str | None:
    """An absolute http(s) URL with a host, of a length a fetch would accept, holding no key; else None."""
    if not isinstance(value, str):
        return None
    url = value.strip()
    if not url or len(url) > MAX_URL_LENGTH or any(ch.isspace() or not ch.isprintable() for ch in url):
        return None
    decoded = unquote(url)
    if visible_text(decoded) != decoded or visible_text(url) != url:
        return None
    if masker.holds_key(url) or masker.holds_key(decoded):
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme.lower() not in {"http", "https"} or not host:
        return None
    return url


def citation(url: object, title: object, snippet: object, masker: Masker) -> Citation | None:
    """One result in the contract's shape, or None when its url is not usable."""
    usable = usable_url(url, masker)
    if usable is None:
        return None
    return {
        "title": plain_text(title, TITLE_MAX_CHARS, masker),
        "url": usable,
        "snippet": plain_text(snippet, SNIPPET_MAX_CHARS, masker),
    }


def first_distinct(candidates: Iterable[Citation | None], limit: int) -> list[Citation]:
    """The usable candidates in order, a url the menu would hold already dropped, at most ``limit``."""
    results: list[Citation] = []
    seen: set[str] = set()
    for cited in candidates:
        if cited is None:
            continue
        same = distinct_key(cited["url"])
        if same in seen:
            continue
        seen.add(same)
        results.append(cited)
        if len(results) >= limit:
            break
    return results


def distinct_key(url: str) -> str:
    """What two spellings of one source share: the menu's canonical form for an https url; for an
    http one the same rules by hand (scheme and host lowered, port 80, the fragment dropped)."""
    canonical = canonical_url(url)
    if canonical is not None:
        return canonical
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return url
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    shown_port = "" if port is None or (scheme, port) == ("http", 80) else f":{port}"
    query = f"?{parts.query}" if parts.query else ""
    return f"{scheme}://{host}{shown_port}{parts.path or '/'}{query}"
