"""The error tree: one class per contract error kind, raised where the fact is known.

The envelope turns any ``ResearchError`` into the contract's ``{"ok": false, "error": ...}`` result
in exactly one place. Messages go to the agent: they are the worker's own words plus values it has
validated (a host, a status, a size), never a key, a credential, page text or server-chosen bytes.
Foreign exceptions (aiohttp, sockets, TLS) become these classes in one table, ``worker.net.error_map``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Self

from worker.guardian.reasons import Reason


class ErrorKind(StrEnum):
    """The contract's error kinds, plus ``internal_error`` for the worker's own failures."""

    INVALID_REQUEST = "invalid_request"
    MISSING_REPORT_ID = "missing_report_id"
    BUDGET_EXHAUSTED = "budget_exhausted"
    SCHEME_NOT_ALLOWED = "scheme_not_allowed"
    URL_NOT_IN_MENU = "url_not_in_menu"
    DESTINATION_BLOCKED = "destination_blocked"
    DNS_FAILURE = "dns_failure"
    TOO_MANY_REDIRECTS = "too_many_redirects"
    UNSUPPORTED_CONTENT_TYPE = "unsupported_content_type"
    HTTP_STATUS = "http_status"
    TIMEOUT = "timeout"
    CONNECTION_FAILED = "connection_failed"
    UPSTREAM_ERROR = "upstream_error"
    RATE_LIMITED = "rate_limited"
    DOMAIN_NOT_ALLOWED = "domain_not_allowed"
    ROBOTS_DISALLOWED = "robots_disallowed"
    INTERNAL_ERROR = "internal_error"


class ResearchError(Exception):
    kind: ClassVar[ErrorKind] = ErrorKind.INTERNAL_ERROR

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def with_message(self, message: str) -> Self:
        """The same error, saying ``message``: its kind and every field it carries (status,
        retry_after_s, reason) kept. Re-making it with ``type(e)(message)`` would drop them, and
        raise for an error whose constructor takes keywords."""
        twin = type(self).__new__(type(self), message)  # no __init__: its keywords are in __dict__
        twin.__dict__.update(self.__dict__)
        twin.args = (message,)
        twin.message = message
        return twin


class InvalidRequest(ResearchError):
    kind = ErrorKind.INVALID_REQUEST


class MissingReportId(ResearchError):
    kind = ErrorKind.MISSING_REPORT_ID


class BudgetExhausted(ResearchError):
    kind = ErrorKind.BUDGET_EXHAUSTED


class GuardianRefusal(ResearchError):
    """A refusal by the guardian; ``reason`` is the label metrics count it by."""

    def __init__(self, message: str, *, reason: Reason) -> None:
        super().__init__(message)
        self.reason = reason


class SchemeNotAllowed(GuardianRefusal):
    kind = ErrorKind.SCHEME_NOT_ALLOWED


class DestinationBlocked(GuardianRefusal):
    kind = ErrorKind.DESTINATION_BLOCKED


class UrlNotInMenu(ResearchError):
    kind = ErrorKind.URL_NOT_IN_MENU


class DnsFailure(ResearchError):
    kind = ErrorKind.DNS_FAILURE


class TooManyRedirects(ResearchError):
    kind = ErrorKind.TOO_MANY_REDIRECTS


class UnsupportedContentType(ResearchError):
    kind = ErrorKind.UNSUPPORTED_CONTENT_TYPE


class HttpStatus(ResearchError):
    """A final answer that is not 2xx; ``retry_after_s`` is the server's Retry-After, when readable."""

    kind = ErrorKind.HTTP_STATUS

    def __init__(self, message: str, *, status: int, retry_after_s: float | None = None) -> None:
        super().__init__(message, status=status)
        self.retry_after_s = retry_after_s


class Timeout(ResearchError):
    kind = ErrorKind.TIMEOUT


class ConnectionFailed(ResearchError):
    kind = ErrorKind.CONNECTION_FAILED


class UpstreamError(ResearchError):
    kind = ErrorKind.UPSTREAM_ERROR


class RateLimited(ResearchError):
    kind = ErrorKind.RATE_LIMITED


class DomainNotAllowed(ResearchError):
    """The host, or a redirect hop's host, is blocked or off the allow list (operator policy)."""

    kind = ErrorKind.DOMAIN_NOT_ALLOWED


class RobotsDisallowed(ResearchError):
    """The site's robots.txt disallows the URL for this worker's user agent."""

    kind = ErrorKind.ROBOTS_DISALLOWED


class InternalError(ResearchError):
    """Not a kind the request or the web caused: a bug, or a job arq could not run at all."""

    kind = ErrorKind.INTERNAL_ERROR
