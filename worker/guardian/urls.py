"""URL checks on the raw string, before any parser normalizes it, and the one canonical form.

The checks refuse what a parser would quietly reinterpret: a backslash that becomes a slash, a
`user@` that hides the real host, `0x7f.1` that getaddrinfo decodes to 127.0.0.1, a zone id or a
percent-encoded host, an invisible character that IDNA maps away. What passes is rebuilt in one
canonical form (scheme and host lower-cased, IDNA host, default port dropped, fragment dropped,
path and query kept as given with only non-ASCII percent-encoded), and that canonical string is
both what the URL menu stores and compares and what gets fetched, so the check and the request
can never disagree about which URL it is.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

import yarl

from worker.errors import DestinationBlocked, SchemeNotAllowed
from worker.guardian.reasons import Reason
from worker.guardian.verdict import IPAddress, Verdict
from worker.limits import MAX_URL_LENGTH

SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
HOST_CHARS = re.compile(r"[a-z0-9\-_.]+")
DOTTED_QUAD = re.compile(
    r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}"
)
# The WHATWG URL parser treats a host whose last label is a number (decimal, or 0x hex) as IPv4,
# and so does getaddrinfo, in all its legacy forms: 2130706433, 0177.1, 0x7f.1, 127.1.
NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")
# Printable ASCII stays as given in path and query; anything else is percent-encoded as UTF-8.
KEEP = "".join(chr(c) for c in range(0x21, 0x7F))


class ClassifiesAddresses(Protocol):
    def classify(self, address: IPAddress) -> Verdict: ...


@dataclass(frozen=True)
class Target:
    """A URL that passed the raw checks: its canonical string and where it points."""

    url: str
    host: str  # ASCII, lower-case; an IPv6 literal without brackets
    port: int
    address: IPAddress | None  # set when the host is an IP literal

    @property
    def site(self) -> tuple[str, int]:
        """The host without a leading ``www.`` and the port: same site means same key."""
        return (self.host[4:] if self.host.startswith("www.") else self.host, self.port)


def _blocked(reason: Reason, detail: str) -> DestinationBlocked:
    return DestinationBlocked(detail, reason=reason)


def parse_https_url(raw: str) -> Target:
    """Check the raw string and return its canonical form; raise the refusal otherwise."""
    if not isinstance(raw, str) or not raw:
        raise _blocked(Reason.MALFORMED_URL, "the URL is empty")
    if len(raw) > MAX_URL_LENGTH:
        raise _blocked(Reason.MALFORMED_URL, f"the URL is longer than {MAX_URL_LENGTH} characters")
    refuse_hidden_characters(raw)
    scheme = SCHEME.match(raw)
    if scheme is None:
        raise _blocked(Reason.MALFORMED_URL, "the URL is not absolute (it has no scheme)")
    if scheme.group(1).lower() != "https":
        raise SchemeNotAllowed(
            f"only https URLs are fetched, not {_shown_scheme(scheme.group(1))}", reason=Reason.SCHEME
        )
    rest = raw[scheme.end() :]
    if not rest.startswith("//"):
        raise _blocked(Reason.MALFORMED_URL, "an https URL must have the form https://host/path")
    rest = rest[2:]
    end = len(rest)
    for sep in "/?#":
        index = rest.find(sep)
        if index != -1:
            end = min(end, index)
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        raise _blocked(Reason.USERINFO, "URLs with credentials (user@host) are refused")
    host_part, port = _split_port(authority)
    if "%" in host_part:
        raise _blocked(Reason.PERCENT_IN_HOST, "a percent sign in the host (encoding or zone id) is refused")
    host, address = _normalize_host(host_part)
    path_and_query = tail.split("#", 1)[0]
    path, question, query = path_and_query.partition("?")
    path = quote(path or "/", safe=KEEP)
    query = quote(query, safe=KEEP)
    shown_host = f"[{host}]" if isinstance(address, ipaddress.IPv6Address) else host
    shown_port = "" if port == 443 else f":{port}"
    url = f"https://{shown_host}{shown_port}{path}{question}{query}"
    return Target(url=url, host=host, port=port, address=address)


# Schemes named in a refusal; any other is only "another scheme", since the text is the URL's
# author's (a redirect's Location comes from the server) and a message never quotes it.
KNOWN_SCHEMES = frozenset({"http", "ftp", "file", "data", "javascript", "mailto", "ws", "wss", "gopher"})


def _shown_scheme(scheme: str) -> str:
    lowered = scheme.lower()
    return f"{lowered}:" if lowered in KNOWN_SCHEMES else "another scheme"


def check_url(raw: str, policy: ClassifiesAddresses) -> Target:
    """The raw checks, then the address policy when the host is an IP literal."""
    return check_address(parse_https_url(raw), policy)


def check_address(target: Target, policy: ClassifiesAddresses) -> Target:
    """A parsed URL judged by the address policy when its host is an IP literal."""
    if target.address is not None:
        verdict = policy.classify(target.address)
        if not verdict.allowed:
            raise DestinationBlocked(f"{target.address} is refused: {verdict.detail}", reason=verdict.reason)
    return target


def canonical_url(raw: str) -> str | None:
    """The canonical string for the menu, or None when the URL would be refused anyway."""
    try:
        return parse_https_url(raw).url
    except (DestinationBlocked, SchemeNotAllowed):
        return None


ASCII_FORBIDDEN = re.compile(r"[\x00-\x20\x7f\\]")


def refuse_hidden_characters(raw: str) -> None:
    if raw.isascii() and ASCII_FORBIDDEN.search(raw) is None:
        return  # the common case, decided without a per-character loop
    for ch in raw:
        code = ord(ch)
        if code <= 0x20 or code == 0x7F or 0x80 <= code <= 0x9F or ch.isspace():
            raise _blocked(Reason.CONTROL_CHARACTER, "control characters and spaces in a URL are refused")
        if ch == "\\":
            raise _blocked(
                Reason.BACKSLASH, "backslashes in a URL are refused (parsers read them as slashes)"
            )
        if unicodedata.category(ch) in {"Cf", "Cs", "Co", "Cn"}:
            # Zero-width, bidi, soft hyphen and the like: IDNA maps some away, hiding the real host.
            raise _blocked(
                Reason.INVISIBLE_CHARACTER, "invisible or unassigned characters in a URL are refused"
            )


def _split_port(authority: str) -> tuple[str, int]:
    if authority.startswith("["):
        close = authority.find("]")
        if close == -1:
            raise _blocked(Reason.MALFORMED_URL, "an IPv6 host must be closed with ]")
        host, after = authority[: close + 1], authority[close + 1 :]
        if after and not after.startswith(":"):
            raise _blocked(Reason.MALFORMED_URL, "unexpected characters after the IPv6 host")
        port_text = after[1:] if after else None
    else:
        host, colon, port_text_raw = authority.partition(":")
        port_text = port_text_raw if colon else None
    if port_text is None or port_text == "":
        return host, 443
    if not port_text.isascii() or not port_text.isdigit():
        raise _blocked(Reason.BAD_PORT, "the port is not a number")
    # A port has at most five digits; a run of thousands would make int() itself raise.
    if len(port_text) > 5:
        raise _blocked(Reason.BAD_PORT, "the port is outside 1..65535")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise _blocked(Reason.BAD_PORT, f"the port {port} is outside 1..65535")
    return host, port


def _normalize_host(host: str) -> tuple[str, IPAddress | None]:
    if not host:
        raise _blocked(Reason.MALFORMED_URL, "the URL has no host")
    if host.startswith("["):
        try:
            address = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise _blocked(Reason.MALFORMED_URL, "the bracketed host is not an IPv6 address") from None
        return address.compressed, address
    _refuse_ambiguous_number(host)
    try:
        ascii_host = yarl.URL.build(scheme="https", host=host).raw_host or ""
    except (ValueError, UnicodeError):
        raise _blocked(Reason.MALFORMED_URL, "the host is not a valid domain name") from None
    ascii_host = ascii_host.lower()
    if ascii_host.endswith("."):
        ascii_host = ascii_host[:-1]
    if (
        not ascii_host
        or len(ascii_host) > 253
        or not HOST_CHARS.fullmatch(ascii_host)
        or "" in ascii_host.split(".")
    ):
        raise _blocked(Reason.MALFORMED_URL, "the host is not a valid domain name")
    if not _a_labels_round_trip(ascii_host):
        raise _blocked(Reason.MALFORMED_URL, "the host has a punycode (xn--) label that does not decode")
    # Again after IDNA: full-width digits and ideographic dots normalize into an IPv4 literal.
    _refuse_ambiguous_number(ascii_host)
    if DOTTED_QUAD.fullmatch(ascii_host):
        return ascii_host, ipaddress.IPv4Address(ascii_host)
    return ascii_host, None


def _a_labels_round_trip(ascii_host: str) -> bool:
    # A broken A-label (xn--, xn--b) makes yarl's URL.host raise; one that decodes to a name which
    # encodes differently (xn--00a -> xn--x1a) is a different host to whoever decodes it first.
    if not any(label.startswith("xn--") for label in ascii_host.split(".")):
        return True
    try:
        shown = yarl.URL.build(scheme="https", host=ascii_host).host or ""
        return yarl.URL.build(scheme="https", host=shown).raw_host == ascii_host
    except (ValueError, UnicodeError):
        return False


def _refuse_ambiguous_number(host: str) -> None:
    labels = host.lower().rstrip(".").split(".")
    numeric = NUMERIC_LABEL.fullmatch(labels[-1]) or labels[-1].isdigit()
    if numeric and not DOTTED_QUAD.fullmatch(host.rstrip(".")):
        raise _blocked(
            Reason.AMBIGUOUS_IP,
            "a numeric host must be a plain dotted quad (no decimal, octal, hex or short forms)",
        )
