"""The HTTP side every search provider shares: a trusted upstream, its bounded answers, its retries.

The upstream's address is configuration (``OPENROUTER_BASE_URL``, ``SEARXNG_URL``), so its session
does not go through the fetch guardian; what it sends back is not trusted at all:

- its session ignores proxy variables (``trust_env=False``), so a key goes only where the
  configuration says, and never follows a redirect: a 307 would re-send the query (and its key)
  to whatever host the Location names. A redirect is an ``upstream_error``;
- a body is read whole before the connection is released, up to ``MAX_ANSWER_BYTES`` after
  decompression; more is an ``upstream_error``, never a worker holding megabytes;
- ``Retry-After`` is read only on the statuses that are retried (on a 200 it means nothing, and a
  value the date parser cannot read must not turn a good answer into a failure); an unreadable
  value is no hint;
- messages are the worker's words and the status number, never the body's text.

Retries: 408, 429, 500, 502, 503 and 504 and connection errors are retried with exponential backoff
and jitter, waiting at least what Retry-After asks, as long as the wait ends before the deadline's
``retry_until``; everything else is final at once. A Retry-After that asks for more than the search
has left ends it at once in ``rate_limited``, whatever the status: the provider has said when it
will answer, and that is after the deadline. Every attempt happens inside the one job run, which
was charged once.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import aiohttp
import orjson

from jobs.providers.base import NOT_EVIDENCE, Deadline, ProviderUnavailable
from worker.config import Settings
from worker.errors import RateLimited, ResearchError, Timeout, UpstreamError
from worker.logs import fields
from worker.net.error_map import translate
from worker.net.retry_after import retry_after_s

log = logging.getLogger("research.search")

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
MAX_ATTEMPTS = 5
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
# A retry starts only with at least this long left before its deadline: one started in the last
# moments could only run out of time, and would turn the failure it follows (a refused connection,
# a 503) into a timeout that says less. Past it (the wait ran late), the failure seen stands.
MIN_ATTEMPT_S = 0.25
# A completion for ten citations is a few kilobytes, a SearXNG page of results tens of them;
# anything near this is not an answer.
MAX_ANSWER_BYTES = 4 * 1024 * 1024

T = TypeVar("T")


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, read whole (within the size bound) before the connection is released."""

    status: int
    content_type: str
    body: bytes
    retry_after_s: float | None  # read on retried statuses only


@dataclass(frozen=True)
class Heard:
    """An answer as received, for the evidence archive: where it came from (no key: that travels
    in a header, which is not kept) and its body."""

    url: str
    answer: Answer


# The search job that wants its answers (web_search sets it around one search): a context variable,
# so the providers need not hand their raw answers up through every return.
HEARD: contextvars.ContextVar[list[Heard] | None] = contextvars.ContextVar("heard", default=None)


class Retryable(Exception):
    """An attempt failed in a way another attempt may not: retried while time allows."""

    def __init__(self, failure: ResearchError, retry_after: float | None) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.retry_after_s = retry_after


class Upstream:
    """One trusted upstream: a session that never follows a redirect, answers read within a bound."""

    def __init__(self, session: aiohttp.ClientSession, peer: str) -> None:
        self.session = session
        self.peer = peer  # who this is, in the worker's words: "the search provider"

    @classmethod
    def open(cls, settings: Settings, peer: str) -> Upstream:
        session = aiohttp.ClientSession(trust_env=False, headers={"User-Agent": settings.user_agent})
        return cls(session, peer)

    async def close(self) -> None:
        await self.session.close()

    async def send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        data: bytes | None = None,
        params: Mapping[str, str] | None = None,
    ) -> Answer:
        async with self.session.request(
            method, url, data=data, params=params, headers=headers, allow_redirects=False
        ) as got:
            body = await read_bounded(got, self.peer)
            hint = retry_after_s(got.headers.get("Retry-After")) if got.status in RETRY_STATUSES else None
            answer = Answer(
                status=got.status,
                content_type=got.headers.get("Content-Type", ""),
                body=body,
                retry_after_s=hint,
            )
            heard = HEARD.get()
            if heard is not None:
                heard.append(Heard(str(got.url), answer))
            return answer


async def read_bounded(response: aiohttp.ClientResponse, peer: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(65_536):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise UpstreamError(
                f"the answer from {peer} is larger than {MAX_ANSWER_BYTES:,} bytes; {NOT_EVIDENCE}"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def status_failure(status: int, peer: str) -> ResearchError:
    """The failure a non-200 status means, in the worker's words; providers name their own specials."""
    if 300 <= status < 400:
        return UpstreamError(
            f"{peer} answered with a redirect (HTTP {status}), which a search never follows; {NOT_EVIDENCE}"
        )
    if status == 429:
        return RateLimited(f"{peer} is rate limiting this worker (HTTP 429)")
    if status == 408:
        return Timeout(f"{peer} timed out (HTTP 408)")
    if status >= 500:
        return ProviderUnavailable(f"{peer} answered HTTP {status}; {NOT_EVIDENCE}")
    return UpstreamError(f"{peer} answered HTTP {status}; {NOT_EVIDENCE}")


def raise_for(answer: Answer, failure: ResearchError) -> NoReturn:
    """Raise ``failure``, as retryable when the answer's status is one that is retried."""
    if answer.status in RETRY_STATUSES:
        raise Retryable(failure, answer.retry_after_s)
    raise failure


async def retrying(attempt: Callable[[], Awaitable[T]], deadline: Deadline, peer: str) -> T:
    """``attempt()`` until it returns, fails for good, or the deadline leaves no room to try again."""
    loop = asyncio.get_running_loop()
    attempts = 0
    while True:
        retry_after: float | None = None
        try:
            async with asyncio.timeout_at(deadline.at):
                return await attempt()
        except TimeoutError:
            raise Timeout(f"{peer} did not answer within the search's {deadline.budget_s:g} s") from None
        except Retryable as retryable:
            failure, retry_after = retryable.failure, retryable.retry_after_s
        except (aiohttp.ClientError, OSError) as exc:
            failure = translate(exc, peer)
        attempts += 1
        delay = backoff_s(attempts, retry_after)
        fits = loop.time() + delay + MIN_ATTEMPT_S <= deadline.retry_until
        if attempts >= MAX_ATTEMPTS or not fits:
            raise given_up(failure, attempts, None if fits else retry_after)
        log.warning(
            "search provider failed; retrying",
            extra=fields(failure=failure.message, attempt=attempts, retry_in_s=round(delay, 3)),
        )
        await asyncio.sleep(delay)
        if loop.time() + MIN_ATTEMPT_S > deadline.retry_until:
            raise given_up(failure, attempts, None)  # the wait ran late (a busy loop, a paused host)


def given_up(failure: ResearchError, attempts: int, retry_after: float | None) -> ResearchError:
    why = f"gave up after {attempts} attempt{'s' if attempts > 1 else ''}"
    if retry_after is not None:
        why += f"; it asked to wait {retry_after:g} s, more than this search had left"
        # Asked to come back after the deadline: that is a rate limit, whatever the status said.
        return RateLimited(f"{failure.message} ({why})", status=failure.status)
    return failure.with_message(f"{failure.message} ({why})")


def backoff_s(attempt: int, retry_after: float | None) -> float:
    # Jitter spreads out replicas that failed together; it is not a secret, so plain random serves.
    if retry_after is not None:
        # Never sooner than asked, and a little later, so replicas told the same moment do not
        # all come back at once.
        return retry_after * random.uniform(1.0, 1.1)  # noqa: S311
    exponential = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (attempt - 1))
    return random.uniform(exponential / 2, exponential)  # noqa: S311


def json_object(body: bytes, unusable: Callable[[str], UpstreamError]) -> dict[str, Any]:
    """The answer's body as a JSON object; ``unusable`` words the refusal for the provider."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise unusable("it is not JSON") from None
    if not isinstance(data, dict):
        raise unusable("it is not a JSON object")
    return data
