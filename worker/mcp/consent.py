"""A URL the MCP user names: on the session's menu with their consent (``RESEARCH_MCP_USER_URLS``).

The menu is right to exist: a run fetches only what it has seen, so a page cannot steer it to an
arbitrary URL. But the user's own words are part of what an MCP session has seen, and MCP can ask
the user: elicitation. So a ``fetch_page`` call for a URL not on the session's menu is, with
``ask``, put to the user as a question that names the URL, its host and why it is asked (never
anything a page said); accepted, the URL joins the report's menu and the call runs as any fetch
(the guardian, redirects and the domain lists still judge it); declined or cancelled, the call is
answered ``url_not_in_menu`` saying so, before anything is enqueued or charged. A host that cannot
be asked (no elicitation capability) is told how an operator lets users name URLs. ``allow``
puts every URL the model names on the menu (one user on their own machine); ``never`` keeps the
menu strict, and the job refuses as it always has.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from worker.client import ResearchClient, error_result
from worker.config import Settings, UserUrls
from worker.errors import UrlNotInMenu
from worker.guardian.urls import canonical_url
from worker.limits import FETCH_PAGE
from worker.logs import fields
from worker.serialization import JsonObject
from worker.state import keys

log = logging.getLogger("research.mcp")

CONSENT_FIELD = "fetch"
# A form of one yes/no field: hosts show the message and the checkbox, and "accept" carries it.
CONSENT_SCHEMA: types.ElicitRequestedSchema = {
    "type": "object",
    "properties": {
        CONSENT_FIELD: {
            "type": "boolean",
            "title": "Fetch this page",
            "description": "Let this research session read the page at the URL above.",
            "default": True,
        }
    },
    "required": [CONSENT_FIELD],
}

DECLINED = (
    "the user declined to let this session fetch that URL; it was not fetched and cost nothing. "
    "Fetch the url of a search result, a link from a fetched page, or ask the user for another URL"
)
CANNOT_ASK = (
    "this report has not seen that URL, and this MCP host cannot ask the user about it (it does "
    "not support elicitation). An operator lets users name URLs with RESEARCH_MCP_USER_URLS=allow "
    "on the MCP server (one user on their own machine), or seeds the report's menu "
    "(research-worker mcp --report with ResearchClient.seed_urls)"
)


def question(url: str, host: str) -> str:
    """What the user is asked: the URL and why, in the server's own words, nothing from a page."""
    return (
        f"The research assistant asks to fetch {url} (host {host}). This session has not seen that "
        "URL in a search result, a fetched page's links or its briefing, so it fetches it only if "
        "you allow it. Fetching reads the page and costs one fetch of this session's budget."
    )


@dataclass(frozen=True)
class UserUrlPolicy:
    """What to do with a URL not on a session's menu; ``menu`` False: no menu, nothing to do."""

    mode: UserUrls
    menu: bool

    @classmethod
    def of(cls, settings: Settings) -> UserUrlPolicy:
        return cls(settings.mcp_user_urls, settings.url_menu)

    async def admit(
        self,
        ctx: ServerRequestContext[Any, Any],
        client: ResearchClient,
        report_id: str,
        arguments: Mapping[str, object],
        responses: types.InputResponses | None = None,
    ) -> JsonObject | types.InputRequiredResult | None:
        """None when the call may go on (its URL is on the menu now, or the job will judge it);
        the ``url_not_in_menu`` result to answer with, nothing enqueued; or, in the sessionless
        era, the question to send back (``responses`` is what the host answered to it)."""
        if not self.menu or self.mode is UserUrls.NEVER:
            return None
        raw = arguments.get("url")
        if not isinstance(raw, str):
            return None  # the call's own checks refuse it
        url = canonical_url(raw)
        if url is None:
            return None  # not an https URL the guardian parses: the job says what is wrong with it
        if await client.redis.sismember(keys.menu(report_id), url):  # type: ignore[misc]
            return None
        if self.mode is UserUrls.ALLOW:
            await client.seed_urls(report_id, [url])
            return None
        host = url.split("/", 3)[2]
        if not ctx.session.check_client_capability(
            types.ClientCapabilities(elicitation=types.ElicitationCapability())
        ):
            return refused(report_id, raw, CANNOT_ASK)
        asked = types.ElicitRequestFormParams(message=question(url, host), requested_schema=CONSENT_SCHEMA)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            # The sessionless era has no server-to-client requests: the call comes back with the
            # question as an input request, and the host calls again carrying the answer.
            key = response_key(url)
            answer = (responses or {}).get(key)
            if not isinstance(answer, types.ElicitResult):
                return types.InputRequiredResult(input_requests={key: types.ElicitRequest(params=asked)})
        else:
            try:
                answer = await ctx.session.elicit_form(asked.message, CONSENT_SCHEMA, ctx.request_id)
            except MCPError as exc:
                # The host declared the capability but could not ask (no back-channel, an error): no.
                log.info(
                    "the user could not be asked about a URL",
                    extra=fields(report_id=report_id, error=str(exc)[:200]),
                )
                return refused(report_id, raw, CANNOT_ASK)
        consented = answer.action == "accept" and (answer.content or {}).get(CONSENT_FIELD, True) is not False
        log.info(
            "the user was asked about a URL",
            extra=fields(report_id=report_id, host=host, action=answer.action, consented=consented),
        )
        if not consented:
            return refused(report_id, raw, DECLINED)
        await client.seed_urls(report_id, [url])
        return None


def response_key(url: str) -> str:
    """The input request's key names the URL asked about, so an answer counts for that URL only."""
    return "consent-" + hashlib.sha256(url.encode()).hexdigest()[:24]


def refused(report_id: str, url: str, message: str) -> JsonObject:
    """The result a refused call gets: a job id of its own, though no job was enqueued."""
    return error_result(FETCH_PAGE, report_id, uuid.uuid4().hex, UrlNotInMenu(message), {"url": url})
