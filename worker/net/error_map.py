"""The one map from foreign exceptions (aiohttp, sockets, TLS, the guardian's socket refusal) to the
error tree, used by the fetcher and by the search providers alike.

Every message is written here from the worker's own words and from values the caller validated
(the peer's host and port, an errno's system text, an OpenSSL verification code's name). Nothing
an exception carries from the wire is copied: aiohttp quotes the server's bytes in its messages (a
bad status line, a header, a body that overran its length), and a message goes to the agent, so a
hostile server could otherwise put its words in the agent's mouth.
"""

from __future__ import annotations

import errno
import os
import ssl
from collections.abc import Callable

import aiohttp

from worker.errors import (
    ConnectionFailed,
    DestinationBlocked,
    DnsFailure,
    ResearchError,
    Timeout,
)
from worker.guardian.connector import SocketRefused

# How one foreign exception becomes an error of the tree, given the peer's name.
Translate = Callable[[BaseException, str], ResearchError]

# OpenSSL's verification codes that a fetch meets in practice, in our words; others by number.
CERTIFICATE_PROBLEMS: dict[int, str] = {
    2: "its issuer's certificate could not be found",
    9: "it is not valid yet",
    10: "it has expired",
    18: "it is self-signed",
    19: "its chain ends in a self-signed certificate that is not trusted",
    20: "its issuer is not trusted",
    21: "its chain could not be verified",
    23: "it was revoked",
    26: "it is not meant for a server",
    62: "it is not valid for this host name",
    64: "it is not valid for this IP address",
}


def translate(exc: BaseException, peer: str) -> ResearchError:
    """The error-tree value for ``exc``; ``peer`` names who was being talked to ("example.org:443",
    "the search provider"), in words the caller chose."""
    if isinstance(exc, ResearchError):
        return exc  # raised by our own code inside aiohttp (the guarded resolver): already in words
    for kind in type(exc).__mro__:  # the most specific class with a row: no row can shadow another
        build = _TABLE.get(kind)
        if build is not None:
            return build(exc, peer)
    return ConnectionFailed(f"the connection to {peer} failed ({type(exc).__name__})")


def _certificate(exc: BaseException, peer: str) -> ResearchError:
    problem = "it could not be verified"
    cause = getattr(exc, "certificate_error", None)
    if isinstance(cause, ssl.SSLCertVerificationError):
        code = cause.verify_code
        problem = CERTIFICATE_PROBLEMS.get(code, f"it failed verification (OpenSSL code {code})")
    return ConnectionFailed(f"TLS: the certificate of {peer} was not accepted: {problem}")


def _connector(exc: BaseException, peer: str) -> ResearchError:
    cause = getattr(exc, "os_error", None)
    if isinstance(cause, SocketRefused):
        return _refused(cause)
    return ConnectionFailed(f"could not connect to {peer}: {_system_words(cause or exc)}")


def _os(exc: BaseException, peer: str) -> ResearchError:
    if isinstance(exc, SocketRefused):
        return _refused(exc)
    return ConnectionFailed(f"the connection to {peer} failed: {_system_words(exc)}")


def _refused(refusal: SocketRefused) -> ResearchError:
    """The guardian refused the socket's address (``worker.guardian.connector``): said as it said it."""
    return DestinationBlocked(f"{refusal.address} is refused: {refusal.detail}", reason=refusal.reason)


def _says(error: type[ResearchError], words: str) -> Translate:
    """A translation that names only the peer: ``words`` with ``{peer}`` filled in."""
    return lambda exc, peer: error(words.format(peer=peer))


_tls = _says(ConnectionFailed, "TLS: the handshake with {peer} failed")


def _system_words(exc: BaseException) -> str:
    """The system's text for an errno (``Connection refused``), never the exception's own string."""
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and code in errno.errorcode:
        return os.strerror(code)
    return "the network reported an error"


# One row per class, in any order: ``translate`` walks the exception's class hierarchy (MRO), so
# aiohttp's classes that inherit from each other (a certificate error is an SSL error is a connector
# error is an OS error) each meet their own row first.
_TABLE: dict[type[BaseException], Translate] = {
    aiohttp.ClientConnectorCertificateError: _certificate,
    aiohttp.ClientSSLError: _tls,
    aiohttp.ClientConnectorDNSError: _says(DnsFailure, "{peer} does not resolve"),
    aiohttp.ClientConnectorError: _connector,
    aiohttp.ServerDisconnectedError: _says(
        ConnectionFailed, "{peer} closed the connection before the answer was complete"
    ),
    aiohttp.ServerTimeoutError: _says(Timeout, "{peer} stopped sending"),
    aiohttp.ClientResponseError: _says(ConnectionFailed, "{peer} sent a response that is not valid HTTP"),
    aiohttp.ClientPayloadError: _says(
        ConnectionFailed, "the body from {peer} broke off or could not be decoded"
    ),
    ssl.SSLError: _tls,
    aiohttp.ClientOSError: _os,
    OSError: _os,
}
