"""The MCP server's bearer tokens: ``RESEARCH_MCP_TOKENS_FILE``, ``{sha256_hex_of_token: org_id}``.

The file holds hashes, never tokens, so a leaked copy (a backup, a config repo) lets no one in.
A token is checked by hashing it and comparing the digest with every known digest in constant
time, so how long a refusal takes says nothing about how close a guess came.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from worker.config import ConfigError
from worker.limits import REPORT_ID
from worker.logs import fields

log = logging.getLogger("research.mcp")

VARIABLE = "RESEARCH_MCP_TOKENS_FILE"
DIGEST = re.compile(r"[0-9a-fA-F]{64}")


@dataclass(frozen=True)
class Caller:
    """Who a valid token speaks for: the org that pays, and the token's digest (never the token)."""

    org_id: str
    digest: str


@dataclass(frozen=True)
class Tokens:
    entries: tuple[tuple[bytes, str], ...]  # (digest, org id)

    def caller(self, token: str) -> Caller | None:
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found: str | None = None
        for known, org_id in self.entries:
            # Every entry is compared, match or not: no early exit to time.
            if hmac.compare_digest(known, digest):
                found = org_id
        return Caller(found, digest.hex()) if found is not None else None


def digest_of(token: str) -> str:
    """What an operator writes in the file for ``token``."""
    return hashlib.sha256(token.encode()).hexdigest()


def load_tokens(path: str | None) -> Tokens:
    """The tokens file, or ``ConfigError`` naming what is wrong (never an entry's key)."""
    if path is None:
        raise ConfigError(
            f"{VARIABLE}: mcp --http needs a tokens file, a JSON object mapping the SHA-256 hex of "
            "each token to the org id it speaks for (docs/mcp.md)"
        )
    file = Path(path)
    try:
        raw = file.read_bytes()
        mode = file.stat().st_mode
    except OSError as exc:
        raise ConfigError(f"{VARIABLE}: cannot read {path}: {exc.strerror}") from None
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ConfigError(f"{VARIABLE}: {path} is not JSON") from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"{VARIABLE}: must be a JSON object mapping token hashes to org ids")
    if not parsed:
        raise ConfigError(f"{VARIABLE}: {path} holds no tokens, so no one could connect")
    entries: list[tuple[bytes, str]] = []
    for position, (digest, org_id) in enumerate(parsed.items(), start=1):
        # The key is never shown: a file written with raw tokens would print a token.
        if not DIGEST.fullmatch(digest):
            raise ConfigError(
                f"{VARIABLE}: entry {position} is not the SHA-256 hex of a token (64 hex digits); the "
                "file holds hashes, never the tokens themselves"
            )
        if not isinstance(org_id, str) or not REPORT_ID.fullmatch(org_id):
            raise ConfigError(
                f"{VARIABLE}: entry {position} has an org id that is not 1-200 letters, digits and -_.:"
            )
        entries.append((bytes.fromhex(digest), org_id))
    if mode & stat.S_IROTH:
        log.warning(
            "the MCP tokens file is readable by every user of this machine; chmod 600 it",
            extra=fields(path=path),
        )
    return Tokens(tuple(entries))


# How often a request may look at the tokens file again: a removed token is refused within this
# (and the contract's 5 s) of the file changing, in open sessions too, since every request of a
# session passes the gate.
RECHECK_S = 1.0


class LiveTokens:
    """The tokens file, read again when it changes (its size, time or inode), no restart needed.

    A request looks at the file at most once a ``RECHECK_S``: one ``stat``. A file that turns
    unreadable or invalid fails closed: every token is refused, and the error logged, until the
    file is good again (a file written in place may be seen half-written for a moment; an
    operator who writes a new file and renames it over the old one never hits that).
    """

    def __init__(self, path: str, tokens: Tokens, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._tokens: Tokens | None = tokens
        self._clock = clock
        self._seen = _signature(path)
        self._checked = clock()

    def caller(self, token: str) -> Caller | None:
        self.refresh()
        return self._tokens.caller(token) if self._tokens is not None else None

    def refresh(self) -> None:
        now = self._clock()
        if now - self._checked < RECHECK_S:
            return
        self._checked = now
        signature = _signature(self.path)
        if signature == self._seen:
            return
        self._seen = signature
        try:
            self._tokens = load_tokens(self.path)
        except ConfigError as exc:
            self._tokens = None
            log.error(
                "the MCP tokens file changed and cannot be read: every token is refused",
                extra=fields(error=str(exc)),
            )
            return
        log.info(
            "the MCP tokens file changed; tokens read again", extra=fields(tokens=len(self._tokens.entries))
        )


def _signature(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
