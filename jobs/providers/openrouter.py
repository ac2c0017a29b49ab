"""The search provider: OpenRouter's chat completions with the web plugin, retried inside one time budget.

One search is one POST to ``{OPENROUTER_BASE_URL}/chat/completions``, never streamed: on the
streaming path the citations arrive after the prose and are easy to drop, and a search without its
citations is unsourced text. The base URL is trusted configuration, so this session does not go
through the fetch guardian; it ignores proxy variables (``trust_env=False``) so the key goes only
where the configuration says.

Retries: 408, 429, 500, 502, 503 and 504 and connection errors are retried with exponential backoff
and jitter, waiting at least what Retry-After asks, as long as the wait fits in the time that is
left; everything else is final at once. Every attempt happens inside the one job run, which the
envelope charged once.

Keys: ``OPENROUTER_API_KEY`` by default; an organization listed in ``RESEARCH_ORG_KEYS_FILE`` bills
its own key. A key lives in a ``Secret`` and is revealed only to build the Authorization header;
provider text that reaches a result or a log line has every key masked first.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from worker.config import Secret, Settings, redact_url
from worker.error_map import translate
from worker.errors import RateLimited, ResearchError, Timeout, UpstreamError
from worker.logs import fields
from worker.retry_after import retry_after_s
from worker.spend import Spend

log = logging.getLogger("research.search")

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
MAX_ATTEMPTS = 5
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
# A completion for ten citations is a few kilobytes; anything near this is not an answer.
MAX_ANSWER_BYTES = 4 * 1024 * 1024
MESSAGE_MAX_CHARS = 200
# OpenRouter's unified switch: effort "none" turns reasoning off on models that allow it.
REASONING_OFF = {"effort": "none"}
REASONING_MANDATORY = "reasoning is mandatory"
# Whatever key a provider message echoes, ours or another, it is masked by its shape too.
KEY_SHAPE = re.compile(r"sk-or-[A-Za-z0-9_\-]+")
NOT_EVIDENCE = "the search may not have run, so this is not evidence that no sources exist"


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, read whole (within the size bound) before the connection is released."""

    status: int
    content_type: str
    body: bytes
    retry_after_s: float | None


@dataclass(frozen=True)
class Completion:
    """The parts of a 200 answer a search uses; the model's prose is never kept."""

    annotations: list[Any]
    finish_reason: str | None
    error: str  # the provider's own error text for this choice, masked; "" when none
    spend: Spend


class OpenRouter:
    """The provider client, built once per worker by the web_search start hook."""

    def __init__(
        self, settings: Settings, session: aiohttp.ClientSession, org_keys: dict[str, Secret]
    ) -> None:
        self.settings = settings
        self.session = session
        self.endpoint = f"{settings.openrouter_base_url}/chat/completions"
        self._org_keys = org_keys
        # Header values must be one printable line; the title is free text from the environment.
        self._title = "".join(ch for ch in settings.app_title if ch.isprintable())

    @classmethod
    async def open(cls, settings: Settings) -> OpenRouter:
        org_keys = dict(settings.org_keys)
        if not settings.openrouter_api_key and not org_keys:
            log.warning("no OpenRouter key is configured: every search will answer upstream_error")
        base = urlsplit(settings.openrouter_base_url)
        if base.scheme == "http" and base.hostname not in {"127.0.0.1", "::1", "localhost"}:
            log.warning("OPENROUTER_BASE_URL is plain http: the key would travel unencrypted")
        session = aiohttp.ClientSession(trust_env=False, headers={"User-Agent": settings.user_agent})
        log.info(
            "search provider ready",
            extra=fields(
                base_url=redact_url(settings.openrouter_base_url),
                model=settings.search_model,
                org_keys=len(org_keys),
            ),
        )
        return cls(settings, session, org_keys)

    async def close(self) -> None:
        await self.session.close()

    def key_for(self, org_id: str | None) -> Secret:
        """The organization's own key when the key file lists it, else the default key."""
        if org_id is not None and org_id in self._org_keys:
            return self._org_keys[org_id]
        if self.settings.openrouter_api_key:
            return self.settings.openrouter_api_key
        raise UpstreamError(
            "no OpenRouter API key is configured on this worker (OPENROUTER_API_KEY, or an entry for "
            "this organization in RESEARCH_ORG_KEYS_FILE); the search did not run"
        )

    async def search(self, query: str, max_results: int, org_id: str | None, key: Secret) -> Completion:
        loop = asyncio.get_running_loop()
        budget_s = self.settings.search_timeout_s
        deadline = loop.time() + budget_s
        reasoning_off = True
        attempts = 0
        while True:
            body = request_body(self.settings.search_model, query, max_results, org_id, reasoning_off)
            retry_after: float | None = None
            try:
                async with asyncio.timeout_at(deadline):
                    answer = await self._post(body, key)
            except TimeoutError:
                raise Timeout(
                    f"the search provider did not answer within the search's {budget_s:g} s"
                ) from None
            except (aiohttp.ClientError, OSError) as exc:
                failure: ResearchError = translate(exc, "the search provider")
            else:
                if answer.status == 200:
                    return parse_completion(answer, key)
                message = provider_message(answer.body, key)
                if reasoning_off and answer.status == 400 and REASONING_MANDATORY in message.lower():
                    # Some routes always reason and refuse a request that turns it off. Sent with no
                    # reasoning field, they use their default; this costs one refused round trip.
                    reasoning_off = False
                    continue
                failure = provider_failure(answer.status, message)
                if answer.status not in RETRY_STATUSES:
                    raise failure
                retry_after = answer.retry_after_s
            attempts += 1
            delay = backoff_s(attempts, retry_after)
            fits = loop.time() + delay < deadline
            if attempts >= MAX_ATTEMPTS or not fits:
                raise given_up(failure, attempts, None if fits else retry_after)
            log.warning(
                "search provider failed; retrying",
                extra=fields(failure=failure.message, attempt=attempts, retry_in_s=round(delay, 3)),
            )
            await asyncio.sleep(delay)

    async def _post(self, body: dict[str, Any], key: Secret) -> Answer:
        async with self.session.post(
            self.endpoint, data=orjson.dumps(body), headers=self._headers(key)
        ) as got:
            raw = await read_bounded(got)
            return Answer(
                status=got.status,
                content_type=got.headers.get("Content-Type", ""),
                body=raw,
                retry_after_s=retry_after_s(got.headers.get("Retry-After")),
            )

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


def request_body(
    model: str, query: str, max_results: int, org_id: str | None, reasoning_off: bool
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": query}],
        "plugins": [{"id": "web", "max_results": max_results}],
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


async def read_bounded(response: aiohttp.ClientResponse) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(65_536):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise UpstreamError(
                f"the search provider's answer is larger than {MAX_ANSWER_BYTES:,} bytes; {NOT_EVIDENCE}"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def parse_completion(answer: Answer, key: Secret) -> Completion:
    if answer.content_type.lower().startswith("text/event-stream"):
        raise UpstreamError(
            f"the search provider streamed its answer, which a search refuses; {NOT_EVIDENCE}"
        )
    try:
        data = orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        raise unusable("it is not JSON") from None
    if not isinstance(data, dict):
        raise unusable("it is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        error = data.get("error")
        if isinstance(error, dict):
            said = mask(error.get("message"), key) or "no message"
            raise UpstreamError(f"the search provider reported an error: {said}; {NOT_EVIDENCE}")
        raise unusable("it has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise unusable("its first choice has no message")
    annotations = message.get("annotations")
    finish_reason = choice.get("finish_reason")
    choice_error = choice.get("error")
    return Completion(
        annotations=annotations if isinstance(annotations, list) else [],
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        error=mask(choice_error.get("message"), key) if isinstance(choice_error, dict) else "",
        spend=parse_spend(data.get("usage")),
    )


def parse_spend(usage: object) -> Spend:
    if not isinstance(usage, dict):
        return Spend()
    return Spend(
        cost_usd=float(_amount(usage.get("cost"))),
        prompt_tokens=int(_amount(usage.get("prompt_tokens"))),
        completion_tokens=int(_amount(usage.get("completion_tokens"))),
    )


def _amount(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return value if math.isfinite(value) and value >= 0 else 0


def unusable(why: str) -> UpstreamError:
    return UpstreamError(f"the search provider's answer was unusable ({why}); {NOT_EVIDENCE}")


def provider_message(body: bytes, key: Secret) -> str:
    """The provider's ``error.message``, masked and shortened; "" when the body has none."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    return mask(error.get("message"), key) if isinstance(error, dict) else ""


def mask(text: object, key: Secret) -> str:
    """Provider text made safe to show: keys masked (before anything else changes), one short line."""
    if not isinstance(text, str):
        return ""
    secret = key.reveal()
    if secret:
        text = text.replace(secret, "***")
    text = KEY_SHAPE.sub("sk-or-***", text)
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return text[:MESSAGE_MAX_CHARS]


def provider_failure(status: int, message: str) -> ResearchError:
    said = f": {message}" if message else ""
    if status == 402:
        return RateLimited(f"the search provider refused for credit (HTTP 402: out of credits){said}")
    if status == 429:
        return RateLimited(f"the search provider is rate limiting this key (HTTP 429){said}")
    if status == 408:
        return Timeout(f"the search provider timed out (HTTP 408){said}")
    if status in (400, 401, 403):
        return UpstreamError(f"the search provider refused the request (HTTP {status}){said}")
    return UpstreamError(f"the search provider answered HTTP {status}{said}")


def given_up(failure: ResearchError, attempts: int, retry_after: float | None) -> ResearchError:
    why = f"gave up after {attempts} attempt{'s' if attempts > 1 else ''}"
    if retry_after is not None:
        why += f"; it asked to wait {retry_after:g} s, more than this search had left"
    return type(failure)(f"{failure.message} ({why})")


def backoff_s(attempt: int, retry_after: float | None) -> float:
    # Jitter spreads out replicas that failed together; it is not a secret, so plain random serves.
    if retry_after is not None:
        # Never sooner than asked, and a little later, so replicas told the same moment do not
        # all come back at once.
        return retry_after * random.uniform(1.0, 1.1)  # noqa: S311
    exponential = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (attempt - 1))
    return random.uniform(exponential / 2, exponential)  # noqa: S311
