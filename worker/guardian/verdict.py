"""A verdict is a value with a reason, not a bool: logs, metrics and check-url show why."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address

from worker.guardian.reasons import Reason

IPAddress = IPv4Address | IPv6Address


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: Reason
    detail: str  # one sentence for people

    @classmethod
    def allow(cls, reason: Reason, detail: str) -> Verdict:
        return cls(True, reason, detail)

    @classmethod
    def deny(cls, reason: Reason, detail: str) -> Verdict:
        return cls(False, reason, detail)
