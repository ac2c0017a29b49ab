"""A verdict is a value with a reason, not a bool: logs, metrics and check-url show why."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str  # a short label for metrics: "public", "operator_allow", "private", "loopback", ...
    detail: str  # one sentence for people

    @classmethod
    def allow(cls, reason: str, detail: str) -> Verdict:
        return cls(True, reason, detail)

    @classmethod
    def deny(cls, reason: str, detail: str) -> Verdict:
        return cls(False, reason, detail)
