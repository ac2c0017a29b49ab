"""Who may see the page: HTTP basic auth compared in constant time, and loopback host names.

Bound to loopback, the page is reachable from this machine's browser, and so from any web page it
opens: a hostile site can rebind its own name to 127.0.0.1 and read the page as same-origin. A
Host header that is not a loopback name gives that away, so such a dashboard answers loopback
names only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from worker.config import Secret
from worker.net.serving import is_loopback

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def authorized(header: str | None, user: str, password: Secret) -> bool:
    if not header:
        return False
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return False
    given_user, sep, given_password = decoded.partition(b":")
    if not sep:
        return False
    # Digests first, so the comparison takes the same time whatever the lengths; both parts are
    # always compared, so the time taken never says which one was wrong.
    user_ok = hmac.compare_digest(_digest(given_user), _digest(user.encode()))
    password_ok = hmac.compare_digest(_digest(given_password), _digest(password.reveal().encode()))
    return user_ok & password_ok


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


def allowed_host_names(bound_host: str) -> frozenset[str] | None:
    """The Host names a dashboard bound to ``bound_host`` answers to; None: any (it is not loopback)."""
    return LOOPBACK_NAMES | {bound_host} if is_loopback(bound_host) else None
