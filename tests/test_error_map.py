"""The error map finds each foreign exception's row by its class hierarchy: every class with a row
meets its own row, whatever classes it inherits from and in whatever order the rows are written."""

from __future__ import annotations

import ssl

import aiohttp
import pytest

from worker.errors import ConnectionFailed, DnsFailure, ResearchError, Timeout
from worker.net.error_map import translate

PEER = "example.org:443"

# Each class with a row, and what its row says (written from the messages, not read from the map).
EXPECTED: list[tuple[type[BaseException], type[ResearchError], str]] = [
    (
        aiohttp.ClientConnectorCertificateError,
        ConnectionFailed,
        f"TLS: the certificate of {PEER} was not accepted",
    ),
    (aiohttp.ClientSSLError, ConnectionFailed, f"TLS: the handshake with {PEER} failed"),
    (aiohttp.ClientConnectorDNSError, DnsFailure, f"{PEER} does not resolve"),
    (aiohttp.ClientConnectorError, ConnectionFailed, f"could not connect to {PEER}"),
    (aiohttp.ServerDisconnectedError, ConnectionFailed, f"{PEER} closed the connection"),
    (aiohttp.ServerTimeoutError, Timeout, f"{PEER} stopped sending"),
    (aiohttp.ClientResponseError, ConnectionFailed, f"{PEER} sent a response that is not valid HTTP"),
    (aiohttp.ClientPayloadError, ConnectionFailed, f"the body from {PEER} broke off"),
    (ssl.SSLError, ConnectionFailed, f"TLS: the handshake with {PEER} failed"),
    (aiohttp.ClientOSError, ConnectionFailed, f"the connection to {PEER} failed"),
    (OSError, ConnectionFailed, f"the connection to {PEER} failed"),
]


def bare(kind: type[BaseException]) -> BaseException:
    """An instance without its constructor's arguments: the map reads attributes with defaults."""
    return kind.__new__(kind)


@pytest.mark.parametrize(("kind", "error", "words"), EXPECTED, ids=lambda v: getattr(v, "__name__", ""))
def test_each_class_meets_its_own_row(
    kind: type[BaseException], error: type[ResearchError], words: str
) -> None:
    result = translate(bare(kind), PEER)
    assert type(result) is error
    assert result.message.startswith(words)


@pytest.mark.parametrize(("kind", "error", "words"), EXPECTED, ids=lambda v: getattr(v, "__name__", ""))
def test_a_subclass_without_a_row_meets_its_nearest_ancestors_row(
    kind: type[BaseException], error: type[ResearchError], words: str
) -> None:
    child = type(f"Unlisted{kind.__name__}", (kind,), {})
    result = translate(bare(child), PEER)
    assert type(result) is error
    assert result.message.startswith(words)


def test_a_class_with_no_row_anywhere_in_its_hierarchy_is_a_failed_connection_by_name() -> None:
    class Strange(Exception):
        pass

    result = translate(Strange("the server's own words"), PEER)
    assert type(result) is ConnectionFailed
    assert result.message == f"the connection to {PEER} failed (Strange)"
