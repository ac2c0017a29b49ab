"""A safety net under every test: no socket may connect, and no name may be looked up, off loopback.

Tests already use fake resolvers and loopback servers; this makes a mistake (or a guardian bug)
fail loudly before a packet leaves the machine, instead of quietly reaching a real address.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

violations: list[str] = []

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo

LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


class LoopbackViolation(OSError):
    pass


def _is_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _check(sock: socket.socket, address: Any) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return  # unix sockets (an embedded Redis) are local by nature
    host = str(address[0])
    if not _is_loopback(host):
        violations.append(host)
        raise LoopbackViolation(f"test tried to connect to {host}: only loopback is allowed")


def _connect(self: socket.socket, address: Any) -> None:
    _check(self, address)
    _real_connect(self, address)


def _connect_ex(self: socket.socket, address: Any) -> int:
    _check(self, address)
    return _real_connect_ex(self, address)


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    name = host.decode() if isinstance(host, bytes) else host
    if name is not None and name not in LOCAL_NAMES and not _is_loopback(str(name)):
        try:
            ipaddress.ip_address(str(name))
        except ValueError:
            violations.append(str(name))
            raise LoopbackViolation(f"test tried to resolve {name!r}: use a fake resolver") from None
        violations.append(str(name))
        raise LoopbackViolation(f"test tried to reach {name}: only loopback is allowed")
    return _real_getaddrinfo(host, *args, **kwargs)


def install() -> None:
    socket.socket.connect = _connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = _getaddrinfo
