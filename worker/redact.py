"""Passwords out of URLs, in one URL or anywhere in a message.

A message quotes a value to say what was wrong with it, and a URL may carry its credentials
(``SEARXNG_URL=https://user:pass@search``, a Redis password). Every configuration error, every line
the command line prints and every log line passes through ``redact_urls``, so no message shows one.
"""

from __future__ import annotations

import re
from collections.abc import Container, Sequence
from typing import AnyStr
from urllib.parse import urlsplit

MASK = "***"
# A scheme, then the authority up to the first character that ends it. The userinfo is what comes
# before the authority's last "@" (as urlsplit reads it: a password may hold an "@" of its own).
URL_AUTHORITY = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<authority>[^\s/?#]*)")


def redact_url(raw: str) -> str:
    """The URL without its password, for messages and logs."""
    try:
        parts = urlsplit(raw)
        password = parts.password
    except ValueError:
        return redact_urls(raw)
    if password is None:
        return raw
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].partition(":")[0]
    return parts._replace(netloc=f"{user}:{MASK}@{netloc[2]}").geturl()


def redact_urls(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***``, the rest as it was."""
    if "@" not in text or "://" not in text:
        return text  # the common case, decided without a regular expression
    return URL_AUTHORITY.sub(_redacted, text)


def _redacted(found: re.Match[str]) -> str:
    authority = found.group("authority")
    userinfo, at, host = authority.rpartition("@")
    if not at or ":" not in userinfo:
        return found.group(0)
    user = userinfo.partition(":")[0]
    return f"{found.group('scheme')}{user}:{MASK}@{host}"


# A key is recognised by any run of this many characters of its secret part: 64 bits of a key,
# never cited by chance (the search cleaner and the archive's mask both look for them).
SECRET_RUN = 16


def secret_run_spans(dense: AnyStr, where: Sequence[int], runs: Container[AnyStr]) -> list[tuple[int, int]]:
    """Where a run of ``SECRET_RUN`` of a secret's characters lies, as spans of the original text.

    ``dense`` is the text with its whitespace taken out (lowered), and ``where[i]`` the original
    index of ``dense[i]``: a key broken by spaces or line breaks is still found. Overlapping or
    touching spans are merged, so a whole key is one span.
    """
    spans: list[tuple[int, int]] = []
    for index in range(len(dense) - SECRET_RUN + 1):
        if dense[index : index + SECRET_RUN] in runs:
            first, last = where[index], where[index + SECRET_RUN - 1] + 1
            if spans and first <= spans[-1][1]:
                spans[-1] = (spans[-1][0], last)
            else:
                spans.append((first, last))
    return spans
