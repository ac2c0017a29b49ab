"""``research-worker mcp --http``: the MCP server over streamable HTTP, behind a gate.

Every request to the app passes the gate first, in this order:

1. ``Origin``: a request a browser sends from a page not on ``RESEARCH_MCP_ORIGINS`` is 403. A web
   page could otherwise reach a server on 127.0.0.1 through DNS rebinding and spend its budgets.
   Clients that are not browsers send no Origin and pass.
2. ``Host``, on a server bound to loopback: one of its loopback names (its own address among
   them), else 421, the other half of the same defence (a rebinding page's Host is its own name).
3. ``Authorization: Bearer TOKEN`` with a token of ``RESEARCH_MCP_TOKENS_FILE``: else 401. The
   file is read again when it changes (``tokens.LiveTokens``), so a removed token is refused, in
   open sessions too, within seconds.
4. A per-token rate limit (``RESEARCH_MCP_RATE_PER_MIN``, a token bucket): else 429 with
   ``Retry-After``.
5. The protocol era: a 2026-07-28 request (one self-contained POST, no session) is answered
   "unsupported version" naming the handshake versions, so a client falls back to a session.
   Each MCP session is one report; a request without a session would have no report.

Then the SDK's streamable HTTP app serves it, with request bodies bounded
(``RESEARCH_MCP_MAX_BODY_BYTES``, 413 past it). The session is bound to the token that opened it:
another token presenting its id is answered as if the session did not exist.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Final

import mcp_types as types
import orjson
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.authentication import AuthCredentials
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from worker.client import ResearchClient
from worker.config import Settings
from worker.mcp.consent import UserUrlPolicy
from worker.mcp.tokens import Caller, LiveTokens, Tokens
from worker.mcp.tools import PROGRESS_EVERY_S, Billing, BillingOf, build_server
from worker.net.serving import is_loopback

PATH: Final = "/mcp"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8301
CALLER_SCOPE_KEY: Final = "research.mcp.caller"
REPORT_PREFIX: Final = "mcp-"


@dataclass
class RateLimiter:
    """A token bucket per bearer token: ``per_minute`` requests, refilled evenly."""

    per_minute: int
    buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # digest -> (level, when)

    def wait_s(self, digest: str, now: float | None = None) -> float:
        """0 when a request may go now (and takes its place), else the seconds until one may."""
        now = time.monotonic() if now is None else now
        rate = self.per_minute / 60.0
        level, then = self.buckets.get(digest, (float(self.per_minute), now))
        level = min(float(self.per_minute), level + (now - then) * rate)
        if level >= 1.0:
            self.buckets[digest] = (level - 1.0, now)
            return 0.0
        self.buckets[digest] = (level, now)
        return (1.0 - level) / rate


class Gate:
    """The checks every HTTP request passes before the MCP app sees it (the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: Tokens | LiveTokens,
        origins: tuple[str, ...],
        limiter: RateLimiter,
        hosts: tuple[str, ...] | None = None,
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.tokens = tokens
        self.origins = frozenset(origins)
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # the lifespan, which starts the session manager
            return
        caller = self.check(Headers(scope=scope))
        if isinstance(caller, Response):
            await caller(scope, receive, send)  # refused
            return
        scope[CALLER_SCOPE_KEY] = caller
        # The SDK binds each session to the principal that opened it: the token's digest.
        token = AccessToken(token=caller.digest, client_id=caller.org_id, scopes=[], subject=caller.digest)
        scope["user"] = AuthenticatedUser(token)
        scope["auth"] = AuthCredentials([])
        await self.app(scope, receive, send)

    def check(self, headers: Headers) -> Caller | Response:
        """Who is calling, or the refusal to send."""
        origin = headers.get("origin")
        if origin is not None and origin.lower().rstrip("/") not in self.origins:
            return _refusal(403, "this Origin is not allowed (RESEARCH_MCP_ORIGINS)")
        if self.hosts is not None and not host_allowed(headers.get("host"), self.hosts):
            # Before the token: a rebinding page never learns whether the server wants one.
            return _refusal(421, "this server answers only to its own loopback names (Host)")
        scheme, _, token = headers.get("authorization", "").partition(" ")
        caller = self.tokens.caller(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
        if caller is None:
            refusal = _refusal(401, "a valid bearer token is required")
            refusal.headers["WWW-Authenticate"] = 'Bearer realm="research-worker"'
            return refusal
        wait_s = self.limiter.wait_s(caller.digest)
        if wait_s > 0:
            refusal = _refusal(429, "too many requests for this token; retry later")
            refusal.headers["Retry-After"] = str(max(1, math.ceil(wait_s)))
            return refusal
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version in MODERN_PROTOCOL_VERSIONS:
            return _unsupported_era(version)
        return caller


def _refusal(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _unsupported_era(requested: str) -> Response:
    error = {
        "code": types.UNSUPPORTED_PROTOCOL_VERSION,
        "message": "this server serves MCP sessions (one report each); use a handshake protocol version",
        "data": {"supported": list(HANDSHAKE_PROTOCOL_VERSIONS), "requested": requested},
    }
    body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": error})
    return Response(body, status_code=400, media_type="application/json")


def session_billing(report_prefix: str = REPORT_PREFIX) -> BillingOf:
    """One report per MCP session, paid by the org of the token that opened it.

    The report id is derived from the session id by a hash, so results and the dashboard, which
    show report ids, never show a session id another client could present.
    """

    def billing(ctx: ServerRequestContext[Any, Any]) -> Billing:
        request = ctx.request
        scope = getattr(request, "scope", None)
        caller = scope.get(CALLER_SCOPE_KEY) if isinstance(scope, dict) else None
        session_id = request.headers.get(MCP_SESSION_ID_HEADER) if request is not None else None
        if not isinstance(caller, Caller) or not session_id:
            raise MCPError(code=types.INVALID_REQUEST, message="a tool call needs an MCP session")
        digest = hashlib.sha256(session_id.encode()).hexdigest()[:32]
        return Billing(report_id=f"{report_prefix}{digest}", org_id=caller.org_id)

    return billing


def loopback_names(host: str) -> tuple[str, ...] | None:
    """The ``Host`` names a server bound to loopback answers (its own address among them), or
    None when it is bound elsewhere and the operator's proxy decides which names reach it."""
    if not is_loopback(host):
        return None
    bare = host.strip("[]").lower()
    own = f"[{bare}]" if ":" in bare else bare
    return tuple(dict.fromkeys((own, "127.0.0.1", "localhost", "[::1]")))


def host_allowed(header: str | None, names: tuple[str, ...]) -> bool:
    """``Host`` is one of ``names``, with or without a port."""
    if not header:
        return False
    value = header.strip().lower()
    if value.startswith("["):
        name = value[: value.find("]") + 1] if "]" in value else value
    else:
        name = value.rpartition(":")[0] if ":" in value else value
    return name in names


def transport_security(host: str, origins: tuple[str, ...]) -> TransportSecuritySettings:
    """The SDK's Host check where it is meaningful: a server bound to loopback answers only to
    loopback names (a rebinding page's Host is its own name). Bound elsewhere, the operator's
    proxy decides which names reach it."""
    names = loopback_names(host)
    if names is None:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*names, *(f"{name}:*" for name in names)],
        allowed_origins=list(origins),
    )


def build_app(
    settings: Settings,
    listing: list[dict[str, Any]],
    client: ResearchClient,
    tokens: Tokens | LiveTokens,
    *,
    host: str,
    version: str,
    progress_every_s: float = PROGRESS_EVERY_S,
    report_prefix: str = REPORT_PREFIX,
) -> ASGIApp:
    billing = session_billing(report_prefix)
    server = build_server(
        listing,
        client,
        billing,
        version=version,
        user_urls=UserUrlPolicy.of(settings),
        progress_every_s=progress_every_s,
    )
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        transport_security=transport_security(host, settings.mcp_origins),
        host=host,
        max_request_body_size=settings.mcp_max_body_bytes,
    )
    limiter = RateLimiter(settings.mcp_rate_per_minute)
    return Gate(app, tokens, settings.mcp_origins, limiter, loopback_names(host))
