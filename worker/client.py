"""ResearchClient: how an orchestrator calls the tools, and ``SyncResearchClient``, its blocking twin.

It enqueues under a job id it chooses, then blocks on the job's wake-up list (written in the same
transaction as the result), so it learns of completion within a millisecond and sends nothing
while it waits. Past its deadline it returns a ``timeout`` result; the job may still finish, and its
result then lands in ``research:result:{job_id}`` as usual.

A client reads only what a client needs (``ClientSettings``: where Redis is, the queue, its wait
deadline), finds an embedded Redis the way every command does, and says what it was about in every
result it returns, its own ``timeout`` and refusals included. Misuse is an exception that says
what to do instead; what a model sends (``call``) is never trusted and never raises.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import threading
import time
import uuid
from collections.abc import Coroutine, Iterable, Mapping
from concurrent.futures import Future
from types import TracebackType
from typing import Any, Final, TypeVar, overload

import orjson
from arq.connections import ArqRedis
from arq.jobs import SerializationError

from worker import embedded
from worker.config import ClientSettings, Settings
from worker.errors import InvalidRequest, Timeout
from worker.limits import DEFAULT_EXTRACT, DEFAULT_MAX_RESULTS, FETCH_PAGE, WEB_SEARCH
from worker.runtime.envelope import parse_report_id
from worker.serialization import dumps
from worker.state import health, keys
from worker.state.menu import Menu
from worker.state.queue import Enqueuer
from worker.state.redis_conn import connect
from worker.state.results import DONE_TTL_MS, About, Result, ResultStore, error_result

# A blocking pop longer than this is split, so a dropped connection is noticed and retried.
MAX_BLOCK_S = 30.0
# A job enqueued by this client less than this long ago has its result in its wake-up list once
# it is written (the list lives DONE_TTL_MS from the write), so a wait needs no first read.
FRESH_FOR_S = DONE_TTL_MS / 1000 - 5.0
REMEMBERED_ENQUEUES = 10_000

# The tools a model may call, and the arguments only the orchestrator may set: a tool call that
# names a report or an organization is trying to spend someone else's budget.
MODEL_TOOLS: Final = (FETCH_PAGE, WEB_SEARCH)
ORCHESTRATOR_ARGUMENTS: Final = frozenset({"report_id", "org_id"})

T = TypeVar("T")


class ClientError(Exception):
    """The client was used in a way it cannot serve; the message says what to do instead."""


class ClientNotOpen(ClientError, RuntimeError):
    pass


class DuplicateJobId(ClientError, ValueError):
    pass


class UnsafeArguments(ClientError, ValueError):
    """Job arguments that JSON cannot carry (an integer beyond 64 bits, an object, NaN)."""


class _Unset:
    pass


UNSET: Final = _Unset()


class ResearchClient:
    """``async with ResearchClient() as client: await client.fetch(report_id, url)``.

    With no arguments it reads ``REDIS_URL``, ``RESEARCH_QUEUE`` and ``RESEARCH_CLIENT_WAIT_S``
    (``ClientSettings.from_env``); ``redis_url``, ``queue_name`` and ``wait_s`` override them.
    """

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        queue_name: str | None = None,
        wait_s: float | None = None,
        settings: ClientSettings | Settings | None = None,
        job_id_prefix: str = "",
    ) -> None:
        if isinstance(settings, Settings):
            settings = ClientSettings.of(settings)
        base = settings if settings is not None else ClientSettings.from_env()
        changes: dict[str, Any] = {}
        if redis_url is not None:
            changes["redis_url"] = _text("redis_url", redis_url)
        if queue_name is not None:
            changes["queue_name"] = _text("queue_name", queue_name)
        if wait_s is not None:
            changes["wait_s"] = _seconds("wait_s", wait_s)
        self.settings = dataclasses.replace(base, **changes)
        self.settings.redis_target  # noqa: B018 - a malformed URL is a ConfigError now, not at open()
        self.wait_s = self.settings.wait_s
        self.redis_url: str | None = None  # where it connected, once open
        self._job_id_prefix = _text("job_id_prefix", job_id_prefix, empty=True)
        self._redis: ArqRedis | None = None
        self._enqueuer: Enqueuer | None = None
        self._results: ResultStore | None = None
        # When this client enqueued each job (monotonic s), for a wait that needs no first read.
        self._enqueued_at: collections.OrderedDict[str, float] = collections.OrderedDict()

    async def open(self) -> ResearchClient:
        if self._redis is not None:
            return self
        found = await asyncio.to_thread(embedded.locate, self.settings.redis_url, self.settings.runtime_dir)
        redis = await connect(dataclasses.replace(self.settings, redis_url=found.url))
        self._redis, self.redis_url = redis, found.url
        self._enqueuer = Enqueuer(redis, self.settings.queue_name)
        # The client only reads results; the TTL is the writer's business.
        self._results = ResultStore(redis, ttl_s=Settings.result_ttl_s, queue_name=self.settings.queue_name)
        return self

    async def close(self) -> None:
        redis, self._redis = self._redis, None
        self._enqueuer = self._results = None
        if redis is not None:
            await redis.aclose()

    async def __aenter__(self) -> ResearchClient:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def redis(self) -> ArqRedis:
        if self._redis is None:
            raise ClientNotOpen("open the client first: `async with ResearchClient(...) as client:`")
        return self._redis

    async def search(
        self, report_id: str, query: str, max_results: int = DEFAULT_MAX_RESULTS, org_id: str | None = None
    ) -> Result:
        # The job clamps max_results (jobs/search.py); the client sends what it was given.
        kwargs: dict[str, Any] = {"report_id": report_id, "query": query, "max_results": max_results}
        if org_id is not None:
            kwargs["org_id"] = org_id
        return await self.run(WEB_SEARCH, kwargs)

    async def fetch(
        self, report_id: str, url: str, extract: str = DEFAULT_EXTRACT, *, fresh: bool = False
    ) -> Result:
        kwargs: dict[str, Any] = {"report_id": report_id, "url": url, "extract": extract}
        if fresh:
            kwargs["fresh"] = True
        return await self.run(FETCH_PAGE, kwargs)

    async def seed_urls(self, report_id: str, urls: Iterable[str]) -> int:
        """Put the briefing's URLs on the report's menu; returns how many were new.

        Only https URLs the guardian would parse enter the menu; others are skipped silently.
        """
        parse_report_id(report_id)
        if isinstance(urls, str):
            raise ClientError("seed_urls takes a list of URLs, not one string")
        window = Settings(budget_window_s=self.settings.budget_window_s)
        return await Menu(self.redis, window).record(report_id, [u for u in urls if isinstance(u, str)])

    @overload
    async def call(
        self,
        name: object,
        arguments: object,
        *,
        report_id: str,
        org_id: str | None = None,
        wait_s: float | None = None,
    ) -> str: ...

    @overload
    async def call(
        self, name: str, arguments: Mapping[str, Any], *, wait_s: float | None = None
    ) -> Result: ...

    async def call(
        self,
        name: object,
        arguments: object,
        *,
        report_id: str | _Unset = UNSET,
        org_id: str | None = None,
        wait_s: float | None = None,
    ) -> str | Result:
        """Run a model's tool call as it came and return the JSON to hand back to the model.

        ``name`` and ``arguments`` (a dict, or the JSON text of one) are the model's; ``report_id``
        (and ``org_id`` for searches) are the orchestrator's. Whatever the model sent, the answer is
        a result: an unknown tool, arguments that are not a JSON object, or a model trying to set
        the report is an ``invalid_request`` result, and nothing is enqueued or charged.

        Without ``report_id`` this is the low-level form kept for callers that put the report in
        the arguments themselves; it is ``run`` and returns the result object.
        """
        if isinstance(report_id, _Unset):
            if not isinstance(name, str) or not isinstance(arguments, Mapping):
                raise ClientError("call(name, arguments, report_id=...) runs a model's tool call")
            return await self.run(name, dict(arguments), wait_s=wait_s)
        report = parse_report_id(report_id)
        job_id = self._new_job_id()
        if not isinstance(name, str) or name not in MODEL_TOOLS:
            unknown = InvalidRequest(
                f"there is no tool by that name; the tools are {' and '.join(MODEL_TOOLS)}"
            )
            return _json(error_result("unknown", report, job_id, unknown))
        try:
            given = model_arguments(arguments)
        except InvalidRequest as unreadable:
            return _json(error_result(name, report, job_id, unreadable))
        if ORCHESTRATOR_ARGUMENTS & given.keys():
            forged = InvalidRequest("report_id and org_id are set by the orchestrator, never by a tool call")
            return _json(error_result(name, report, job_id, forged, about_of(name, given)))
        kwargs = {"report_id": report, **given}
        if org_id is not None and name == WEB_SEARCH:
            kwargs["org_id"] = org_id
        return _json(await self._run(name, kwargs, job_id, wait_s))

    async def run(self, function: str, kwargs: Mapping[str, Any], *, wait_s: float | None = None) -> Result:
        """Enqueue one job (``kwargs`` include ``report_id``) and wait for its result object."""
        return await self._run(function, dict(kwargs), self._new_job_id(), wait_s)

    async def _run(self, function: str, kwargs: dict[str, Any], job_id: str, wait_s: float | None) -> Result:
        await self.enqueue(function, kwargs, job_id=job_id)
        report_id = kwargs.get("report_id")
        about = about_of(function, kwargs)
        return await self.wait(
            job_id, function=function, report_id=report_id, about=about, wait_s=wait_s, fresh=True
        )

    async def enqueue(self, function: str, kwargs: Mapping[str, Any], job_id: str | None = None) -> str:
        enqueuer = self._open_part(self._enqueuer)
        job_id = job_id or self._new_job_id()
        try:
            created = await enqueuer.enqueue(function, job_id, dict(kwargs))
        except SerializationError as exc:
            reason = exc.__cause__ or exc
            raise UnsafeArguments(f"{function}'s arguments are not JSON a job can carry: {reason}") from None
        if not created:
            raise DuplicateJobId(f"a job with id {job_id!r} already exists")
        self._enqueued_at[job_id] = time.monotonic()
        if len(self._enqueued_at) > REMEMBERED_ENQUEUES:
            self._enqueued_at.popitem(last=False)
        return job_id

    async def wait(
        self,
        job_id: str,
        *,
        function: str = "unknown",
        report_id: object = None,
        about: About | None = None,
        wait_s: float | None = None,
        fresh: bool = False,
    ) -> Result:
        """The job's result, waking when it is written; a ``timeout`` result past the deadline.

        ``fresh`` skips the first read for a job enqueued a moment ago: its wake-up list will hold
        the result, so the blocking pop alone finds it. A job this client enqueued less than the
        wake-up's lifetime ago is such a job: a result written since lives on in its wake-up.
        """
        results = self._open_part(self._results)
        enqueued = self._enqueued_at.pop(job_id, None)
        fresh = fresh or (enqueued is not None and time.monotonic() - enqueued < FRESH_FOR_S)
        limit = self.wait_s if wait_s is None else _seconds("wait_s", wait_s)
        deadline = time.monotonic() + limit
        if not fresh and (done := await results.read(job_id)) is not None:
            return done
        while (left := deadline - time.monotonic()) > 0:
            block = min(left, MAX_BLOCK_S)
            with contextlib.suppress(TimeoutError):
                woken = await asyncio.wait_for(results.wait(job_id, block), block + 5.0)
                if woken is not None:
                    return woken
        # The wake-up may have gone to another waiter or expired: the result key is the record.
        if (done := await results.read(job_id)) is not None:
            return done
        late = Timeout(
            f"no result within {limit:g} s; the job may still finish and write {keys.result(job_id)}"
        )
        return error_result(function, report_id if isinstance(report_id, str) else None, job_id, late, about)

    async def result(self, job_id: str) -> Result | None:
        """A finished job's result from its result key, or None (not finished, or expired)."""
        return await self._open_part(self._results).read(job_id)

    async def workers_alive(self) -> bool:
        """True while at least one worker beats on this client's queue."""
        return await health.any_alive(self.redis, self.settings.queue_name)

    def _new_job_id(self) -> str:
        return f"{self._job_id_prefix}{uuid.uuid4().hex}"

    def _open_part(self, part: T | None) -> T:
        if part is None:
            raise ClientNotOpen("open the client first: `async with ResearchClient(...) as client:`")
        return part


class SyncResearchClient:
    """The same client for scripts and notebooks; every method blocks until its answer.

    ``with SyncResearchClient() as client: client.fetch(report_id, url)``. The async client runs
    on a private event loop in a background thread, so it works where a loop already runs (a
    notebook) as well as where none does (a script).
    """

    def __init__(self, redis_url: str | None = None, **options: Any) -> None:
        self._client = ResearchClient(redis_url, **options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def settings(self) -> ClientSettings:
        return self._client.settings

    def open(self) -> SyncResearchClient:
        if self._loop is not None:
            return self
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="research-client", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self._submit(self._client.open())
        except BaseException:
            self._stop_loop()
            raise
        return self

    def close(self) -> None:
        if self._loop is None:
            return
        try:
            self._submit(self._client.close())
        finally:
            self._stop_loop()

    def __enter__(self) -> SyncResearchClient:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def search(
        self, report_id: str, query: str, max_results: int = DEFAULT_MAX_RESULTS, org_id: str | None = None
    ) -> Result:
        return self._submit(self._client.search(report_id, query, max_results, org_id))

    def fetch(
        self, report_id: str, url: str, extract: str = DEFAULT_EXTRACT, *, fresh: bool = False
    ) -> Result:
        return self._submit(self._client.fetch(report_id, url, extract, fresh=fresh))

    def seed_urls(self, report_id: str, urls: Iterable[str]) -> int:
        return self._submit(self._client.seed_urls(report_id, urls))

    def call(
        self,
        name: object,
        arguments: object,
        *,
        report_id: str,
        org_id: str | None = None,
        wait_s: float | None = None,
    ) -> str:
        return self._submit(
            self._client.call(name, arguments, report_id=report_id, org_id=org_id, wait_s=wait_s)
        )

    def run(self, function: str, kwargs: Mapping[str, Any], *, wait_s: float | None = None) -> Result:
        return self._submit(self._client.run(function, kwargs, wait_s=wait_s))

    def result(self, job_id: str) -> Result | None:
        return self._submit(self._client.result(job_id))

    def workers_alive(self) -> bool:
        return self._submit(self._client.workers_alive())

    def _submit(self, work: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            work.close()
            raise ClientNotOpen("open the client first: `with SyncResearchClient(...) as client:`")
        future: Future[T] = asyncio.run_coroutine_threadsafe(work, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # interrupted: do not leave the wait running on the loop
            raise

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=5)
        if loop is not None:
            loop.close()


def model_arguments(arguments: object) -> dict[str, Any]:
    """A model's tool arguments as a JSON object a job can carry, or ``InvalidRequest``.

    A dict is read as the JSON text it stands for, so a dict and its JSON text give the same job:
    an integer beyond 64 bits becomes a number the job then refuses, never a serialization error.
    """
    if isinstance(arguments, Mapping):
        try:
            text: str | bytes = json.dumps(arguments, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            raise InvalidRequest("the tool arguments must be a JSON object of strings and numbers") from None
    elif isinstance(arguments, str | bytes):
        text = arguments
    else:
        raise InvalidRequest("the tool arguments must be a JSON object")
    if not text.strip():
        return {}  # some frameworks send "" for a call without arguments
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise InvalidRequest(
            "the tool arguments are not JSON a job can carry (malformed, or a number too large)"
        ) from None
    if not isinstance(parsed, dict):
        raise InvalidRequest("the tool arguments must be a JSON object")
    return parsed


def about_of(function: str, arguments: Mapping[str, Any]) -> About | None:
    """What a job is about, as its own tool says (``worker.settings.about_of``); imported on first
    use, since the tools take a while to import and most calls never need it."""
    from worker.settings import about_of as tools_about_of

    return tools_about_of(function, arguments)


def _json(result: Result) -> str:
    return dumps(result).decode()


def _text(name: str, value: object, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value):
        raise ClientError(f"{name} must be a non-empty string")
    return value


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise ClientError(f"{name} must be a positive number of seconds")
    return float(value)
