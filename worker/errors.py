"""The error tree: one class per contract error kind, raised where the fact is known.

The envelope turns any ``ResearchError`` into the contract's ``{"ok": false, "error": ...}`` result
in exactly one place. Messages go to the agent: they say what happened in plain words and never
carry a key, a credential or page text.
"""

from __future__ import annotations

from typing import ClassVar


class ResearchError(Exception):
    kind: ClassVar[str] = "internal_error"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class InvalidRequest(ResearchError):
    kind = "invalid_request"


class MissingReportId(ResearchError):
    kind = "missing_report_id"


class BudgetExhausted(ResearchError):
    kind = "budget_exhausted"


class GuardianRefusal(ResearchError):
    """A refusal by the guardian; ``reason`` is a short machine-readable label for metrics."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class SchemeNotAllowed(GuardianRefusal):
    kind = "scheme_not_allowed"


class DestinationBlocked(GuardianRefusal):
    kind = "destination_blocked"


class UrlNotInMenu(ResearchError):
    kind = "url_not_in_menu"


class DnsFailure(ResearchError):
    kind = "dns_failure"


class TooManyRedirects(ResearchError):
    kind = "too_many_redirects"


class UnsupportedContentType(ResearchError):
    kind = "unsupported_content_type"


class HttpStatus(ResearchError):
    kind = "http_status"


class Timeout(ResearchError):
    kind = "timeout"


class ConnectionFailed(ResearchError):
    kind = "connection_failed"


class UpstreamError(ResearchError):
    kind = "upstream_error"


class RateLimited(ResearchError):
    kind = "rate_limited"


class InternalError(ResearchError):
    """Not a contract kind of its own choosing: a bug, or a job arq could not run at all."""

    kind = "internal_error"


ERROR_KINDS: tuple[str, ...] = (
    InvalidRequest.kind,
    MissingReportId.kind,
    BudgetExhausted.kind,
    SchemeNotAllowed.kind,
    UrlNotInMenu.kind,
    DestinationBlocked.kind,
    DnsFailure.kind,
    TooManyRedirects.kind,
    UnsupportedContentType.kind,
    HttpStatus.kind,
    Timeout.kind,
    ConnectionFailed.kind,
    UpstreamError.kind,
    RateLimited.kind,
    InternalError.kind,
)
