"""OpenRouter's chat completions, shared by the web plugin and the server tool: keys, request, answer.

One search is one POST to ``{OPENROUTER_BASE_URL}/chat/completions``, never streamed: on the
streaming path the citations arrive after the prose and are easy to drop, and a search without its
citations is unsourced text. The two providers differ only in what the body asks for
(``openrouter_plugin``, ``openrouter_tool``); both keep only the answer's ``url_citation``
annotations and its usage, never the model's prose.

Keys: ``OPENROUTER_API_KEY`` by default; an organization listed in ``RESEARCH_ORG_KEYS_FILE`` bills
its own key. A key lives in a ``Secret`` and is revealed only to build the Authorization header.

What OpenRouter relays is hostile input (``jobs.providers.upstream`` says how answers are read):
its error texts go to the log, masked and cut, never into a message for the agent, which names the
failure and the status only; its usage figures pass ``worker.state.spend.read_spend``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from jobs.providers.base import NOT_EVIDENCE, Deadline, Found, PaidFailure
from jobs.providers.cleaning import Masker, citation, first_distinct, one_line
from jobs.providers.upstream import Answer, Upstream, json_object, raise_for, retrying, status_failure
from worker.config import Secret, Settings, redact_url
from worker.errors import RateLimited, ResearchError, UpstreamError
from worker.logs import fields
from worker.serialization import JsonObject, JsonValue
from worker.state.result_records import Citation
from worker.state.spend import Spend, read_spend

log = logging.getLogger("research.search")

PEER = "the search provider"
# OpenRouter's unified switch: effort "none" turns reasoning off on models that allow it.
REASONING_OFF = {"effort": "none"}
REASONING_MANDATORY = "reasoning is mandatory"
# More searches than this in one completion is not a count we believe (the server tool runs a few).
MAX_SEARCHES_RUN = 1000

# Builds a request body; the flag says whether to send the reasoning-off switch.
BodyBuilder = Callable[[bool], JsonObject]


@dataclass(frozen=True)
class Completion:
    """The parts of a 200 answer a search uses; the model's prose is never kept."""

    annotations: list[Any]
    finish_reason: str | None
    spend: Spend
    # usage.server_tool_use.web_search_requests when the answer carries it: how many searches ran.
    searches_run: int | None = None


class OpenRouter:
    """The OpenRouter client, built once per worker and shared by both OpenRouter providers."""

    def __init__(self, settings: Settings, upstream: Upstream, masker: Masker) -> None:
        self.settings = settings
        self.upstream = upstream
        self.masker = masker
        self.endpoint = f"{settings.openrouter_base_url}/chat/completions"
        # Header values must be one printable line; the title is free text from the environment.
        self._title = "".join(ch for ch in settings.app_title if ch.isprintable())

    @classmethod
    def open(cls, settings: Settings) -> OpenRouter:
        if not settings.openrouter_api_key and not settings.org_keys:
            log.warning("no OpenRouter key is configured: every OpenRouter search will answer upstream_error")
        base = urlsplit(settings.openrouter_base_url)
        if base.scheme == "http" and base.hostname not in {"127.0.0.1", "::1", "localhost"}:
            log.warning("OPENROUTER_BASE_URL is plain http: the key would travel unencrypted")
        log.info(
            "OpenRouter client ready",
            extra=fields(
                base_url=redact_url(settings.openrouter_base_url),
                model=settings.search_model,
                org_keys=len(settings.org_keys),
            ),
        )
        return cls(settings, Upstream.open(settings, PEER), Masker.from_settings(settings))

    async def close(self) -> None:
        await self.upstream.close()

    def key_for(self, org_id: str | None) -> Secret:
        """The organization's own key when the key file lists it, else the default key."""
        if org_id is not None and org_id in self.settings.org_keys:
            return self.settings.org_keys[org_id]
        if self.settings.openrouter_api_key:
            return self.settings.openrouter_api_key
        raise UpstreamError(
            "no OpenRouter API key is configured on this worker (OPENROUTER_API_KEY, or an entry for "
            "this organization in RESEARCH_ORG_KEYS_FILE); the search did not run"
        )

    async def complete(self, build: BodyBuilder, key: Secret, deadline: Deadline) -> Completion:
        reasoning_off = True

        async def attempt() -> Completion:
            nonlocal reasoning_off
            answer = await self._post(build(reasoning_off), key)
            if reasoning_off and answer.status == 400 and REASONING_MANDATORY in self._said(answer).lower():
                # Some routes always reason and refuse a request that turns it off. Sent with no
                # reasoning field, they use their default; this costs one refused round trip.
                reasoning_off = False
                answer = await self._post(build(reasoning_off), key)
            if answer.status == 200:
                return parse_completion(answer, self.masker)
            log.warning(
                "search provider refused",
                extra=fields(status=answer.status, provider_said=one_line(self._said(answer), self.masker)),
            )
            raise_for(answer, failure(answer.status))

        return await retrying(attempt, deadline, PEER)

    async def _post(self, body: JsonObject, key: Secret) -> Answer:
        return await self.upstream.send(
            "POST", self.endpoint, data=orjson.dumps(body), headers=self._headers(key)
        )

    def _said(self, answer: Answer) -> str:
        """The provider's ``error.message`` (for the reasoning check and the log only); "" when none."""
        try:
            data = orjson.loads(answer.body)
        except orjson.JSONDecodeError:
            return ""
        error = data.get("error") if isinstance(data, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        return message if isinstance(message, str) else ""

    def _headers(self, key: Secret) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {key.reveal()}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "HTTP-Referer": self.settings.http_referer,
            "X-OpenRouter-Title": self._title,
            # The older name of the same header, still read by OpenRouter for compatibility.
            "X-Title": self._title,
        }


def common_body(model: str, messages: list[JsonValue], org_id: str | None, reasoning_off: bool) -> JsonObject:
    """What every search completion asks, whichever way it searches."""
    body: JsonObject = {
        "model": model,
        "messages": messages,
        "temperature": 0,
        # Never a stream: see the module docstring. Stated, not left to the default.
        "stream": False,
    }
    if reasoning_off:
        body["reasoning"] = dict(REASONING_OFF)
    if org_id is not None:
        # The provider's abuse tracking sees the organization, never a report id.
        body["user"] = org_id
    return body


def failure(status: int) -> ResearchError:
    if status == 402:
        return RateLimited(f"{PEER} refused for credit (HTTP 402: out of credits)")
    if status == 429:
        return RateLimited(f"{PEER} is rate limiting this key (HTTP 429)")
    if status in (401, 403):
        return UpstreamError(f"{PEER} refused this worker's key (HTTP {status}); the search did not run")
    if status == 400:
        return UpstreamError(f"{PEER} refused the request (HTTP 400); the search did not run")
    return status_failure(status, PEER)


def parse_completion(answer: Answer, masker: Masker) -> Completion:
    if answer.content_type.lower().startswith("text/event-stream"):
        raise UpstreamError(f"{PEER} streamed its answer, which a search refuses; {NOT_EVIDENCE}")
    data = json_object(answer.body, unusable)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        error = data.get("error")
        if isinstance(error, dict):
            log.warning(
                "search provider answered 200 with an error",
                extra=fields(provider_said=one_line(error.get("message"), masker)),
            )
            raise UpstreamError(f"{PEER} answered with an error instead of a completion; {NOT_EVIDENCE}")
        raise unusable("it has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise unusable("its first choice has no message")
    annotations = message.get("annotations")
    finish_reason = choice.get("finish_reason")
    choice_error = choice.get("error")
    if isinstance(choice_error, dict):
        log.warning(
            "search provider's choice carries an error",
            extra=fields(provider_said=one_line(choice_error.get("message"), masker)),
        )
    usage = data.get("usage")
    return Completion(
        annotations=annotations if isinstance(annotations, list) else [],
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        spend=parse_spend(usage),
        searches_run=searches_run(usage),
    )


def parse_spend(usage: object) -> Spend:
    if not isinstance(usage, dict):
        return Spend()
    return read_spend(usage.get("cost"), usage.get("prompt_tokens"), usage.get("completion_tokens"))


def searches_run(usage: object) -> int | None:
    tools = usage.get("server_tool_use") if isinstance(usage, dict) else None
    count = tools.get("web_search_requests") if isinstance(tools, dict) else None
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_SEARCHES_RUN:
        return None
    return count


def unusable(why: str) -> UpstreamError:
    return UpstreamError(f"{PEER}'s answer was unusable ({why}); {NOT_EVIDENCE}")


def citations(completion: Completion, limit: int, masker: Masker) -> list[Citation]:
    """The answer's usable ``url_citation`` annotations; an answer with none is an error, never []."""
    if completion.finish_reason == "error":
        raise UpstreamError(f"{PEER}'s answer ended in an error; {NOT_EVIDENCE}")
    results = first_distinct((url_citation(a, masker) for a in completion.annotations), limit)
    if results:
        return results
    # An agent would read an empty list as "nothing exists" when the search may simply not have run.
    if completion.finish_reason == "tool_calls":
        why = "the model asked for a search that the provider did not run"
    elif completion.searches_run == 0:
        why = "the model answered without running the search"
    elif completion.searches_run is not None:
        why = "the search ran but the answer cited no usable source"
    else:
        why = "the search returned no usable citation"
    raise UpstreamError(f"{why}; {NOT_EVIDENCE}")


def billed_citations(completion: Completion, limit: int, masker: Masker) -> Found:
    """``citations`` with the completion's spend; an answer with none usable is a ``PaidFailure``:
    it was billed all the same, and the spend is recorded before the failure is the result."""
    try:
        return Found(citations(completion, limit, masker), completion.spend)
    except UpstreamError as failure:
        raise PaidFailure(failure.message, completion.spend) from None


def url_citation(annotation: object, masker: Masker) -> Citation | None:
    if not isinstance(annotation, dict) or annotation.get("type") != "url_citation":
        return None
    cited = annotation.get("url_citation")
    if not isinstance(cited, dict):
        return None
    return citation(cited.get("url"), cited.get("title"), cited.get("content"), masker)
