"""The worker's secrets masked in every byte the archive writes.

A provider may repeat what it was sent (a model's prose that quotes its key, an error text that
echoes the Authorization header), and the archive keeps answers as received: without this, the key
would sit in the WARC file and in every export of the report. So each record's bytes (target URI,
heads, payload, the search's summary) pass through ``SecretMask`` before the record is built, and
warcio's lengths and digests are those of the masked bytes: the record stays valid.

What is masked is what ``jobs.providers.cleaning`` masks in a result, on bytes: every secret the
worker holds by its value, case-insensitively and across ASCII whitespace, and any run of
``SECRET_RUN`` characters of a key's secret part (the part after ``sk-or-v1-``: a provider that
echoes the hex digits alone, upper-cased or cut, still echoes the key). Other keys of the same shape
are not ours and stay: the archive is evidence, changed only where it would leak.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import orjson

from worker.archive.capture import Capture
from worker.config import Settings
from worker.redact import SECRET_RUN, secret_run_spans

MASK = b"***"
KEY_PREFIX = re.compile(r"^sk-or-(?:v\d+-)?", re.IGNORECASE)
SPACE = b" \t\r\n\f\v"  # ASCII only: a byte of a UTF-8 character is never whitespace here
_GAP = b"[ \\t\\r\\n\\f\\v]*"


def held_secrets(settings: Settings) -> list[str]:
    """Every secret the worker holds: the default key, each organization's key, SearXNG's password."""
    secrets = [settings.openrouter_api_key.reveal()]
    secrets += [key.reveal() for key in settings.org_keys.values()]
    if settings.searxng_url is not None:
        password = urlsplit(settings.searxng_url).password
        if password:
            secrets.append(password)
    return [secret for secret in secrets if secret]


class SecretMask:
    """Masks held secrets in bytes; ``mask`` returns its argument itself when nothing was found."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = sorted({s.encode("utf-8") for s in secrets if s}, key=len, reverse=True)
        self._whole = (
            re.compile(b"|".join(_GAP.join(re.escape(bytes([b])) for b in v) for v in values), re.IGNORECASE)
            if values
            else None
        )
        parts = ["".join(KEY_PREFIX.sub("", s.decode("utf-8")).split()).lower() for s in values]
        self._runs = frozenset(
            part[i : i + SECRET_RUN].encode("utf-8")
            for part in parts
            for i in range(len(part) - SECRET_RUN + 1)
        )
        # A run can only sit inside a stretch of the secret parts' own characters (whitespace
        # between them allowed): found by the regular expression engine, checked in Python after.
        alphabet = {ch for part in parts if len(part) >= SECRET_RUN for ch in part.encode("utf-8")}
        alphabet |= {ord(chr(ch).upper()) for ch in alphabet if chr(ch).upper().isascii()}
        if self._runs:
            cls = b"[" + b"".join(re.escape(bytes([ch])) for ch in sorted(alphabet)) + b"]"
            self._stretch: re.Pattern[bytes] | None = re.compile(
                cls + b"(?:" + _GAP + cls + b"){%d,}" % (SECRET_RUN - 1)
            )
        else:
            self._stretch = None

    @classmethod
    def from_settings(cls, settings: Settings) -> SecretMask:
        return cls(held_secrets(settings))

    @property
    def empty(self) -> bool:
        return self._whole is None

    def mask(self, data: bytes) -> bytes:
        if self._whole is None:
            return data
        spans = [(m.start(), m.end()) for m in self._whole.finditer(data)]
        if self._stretch is not None:
            for stretch in self._stretch.finditer(data):
                spans += self._run_spans(data, stretch.start(), stretch.end())
        if not spans:
            return data
        spans.sort()
        out: list[bytes] = []
        at = 0
        for start, stop in spans:
            if start < at:  # overlaps the last mask: one mask covers both
                at = max(at, stop)
                continue
            out += [data[at:start], MASK]
            at = stop
        out.append(data[at:])
        return b"".join(out)

    def text(self, value: str) -> str:
        return self.mask(value.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")

    def capture(self, capture: Capture) -> Capture:
        """A copy of ``capture`` with every hop's URL, heads and body masked."""
        masked = Capture()
        masked.peers = list(capture.peers)
        masked.hops = [
            replace(
                hop,
                url=self.text(hop.url),
                request_head=self.mask(hop.request_head),
                response_head=self.mask(hop.response_head),
                chunks=[self.mask(hop.body())] if hop.chunks else [],
            )
            for hop in capture.hops
        ]
        return masked

    def _run_spans(self, data: bytes, start: int, stop: int) -> list[tuple[int, int]]:
        """Where a run of ``SECRET_RUN`` bytes of a secret part lies in ``data[start:stop]``."""
        where = [i for i in range(start, stop) if data[i] not in SPACE]
        return secret_run_spans(bytes(data[i] for i in where).lower(), where, self._runs)


def masked_search(mask: SecretMask | None, search: Mapping[str, Any]) -> dict[str, Any]:
    """A search's answer and summary with every secret masked. The mask replaces a key's characters
    and the spaces between them, never a quote or a bracket: the summary stays the JSON it was."""
    if mask is None:
        return dict(search)
    return {
        "endpoint": mask.text(search["endpoint"]),
        "content_type": mask.text(search["content_type"]),
        "answer": mask.mask(search["answer"]),
        "summary": orjson.loads(mask.mask(orjson.dumps(search["summary"]))),
    }


def masked(mask: SecretMask | None, data: bytes) -> bytes:
    return data if mask is None else mask.mask(data)
