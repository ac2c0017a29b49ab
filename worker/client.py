"""ResearchClient: how an orchestrator calls the tools, and ``SyncResearchClient``, its blocking twin.

It enqueues under a job id it chooses, then blocks on the job's wake-up list (written in the same
transaction as the result), so it learns of completion within a millisecond and sends nothing
while it waits. Past its deadline it returns a ``timeout`` result; the job may still finish, and its
result then lands in ``research:result:{job_id}`` as usual.

A client reads only what a client needs (``ClientSettings``: where Redis is, the queue, its wait
deadline), finds an embedded Redis the way every command does, and says what it was about in every
result it returns, its own ``timeout`` and refusals included. Misuse is an exception that says
what to do instead; what a model sends (``call``) is never trusted and never raises. A Redis that
refuses writes because it is full is ``RedisOutOfMemory``, the client's own exception.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import dataclasses
import functools
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, Concatenate, Final, Literal, ParamSpec, TypeVar, overload

from arq.connections import ArqRedis
from arq.jobs import SerializationError
from redis.exceptions import ResponseError

from jobs.facts import about_of
from worker import embedded
from worker.citations import Verifies
from worker.config import ClientSettings, Settings, redact_url
from worker.errors import InvalidRequest, ResearchError, Timeout
from worker.guardian.domains import DomainListError, DomainPolicy
from worker.limits import DEFAULT_EXTRACT, DEFAULT_MAX_RESULTS, FETCH_PAGE, WEB_SEARCH
from worker.runtime.envelope import parse_report_id
from worker.serialization import JobArguments, JsonObject, dumps
from worker.shapes import Shape, anthropic_blocks
from worker.state import health, keys
from worker.state.memory import is_out_of_memory
from worker.state.menu import Menu
from worker.state.queue import Enqueuer
from worker.state.redis_conn import connect
from worker.state.report_domains import ReportDomains
from worker.state.result_records import About, ErrorResult, Head, as_json
from worker.state.results import DONE_TTL_MS, ResultStore
from worker.tool_calls import MODEL_TOOLS, check_call, model_arguments
from worker.tracing.context import TRACEPARENT, current_traceparent, parse_traceparent

# A blocking pop longer than this is split, so a dropped connection is noticed and retried.
MAX_BLOCK_S = 30.0
# A job enqueued by this client less than this long ago has its result in its wake-up list once
# it is written (the list lives DONE_TTL_MS from the write), so a wait needs no first read.
FRESH_FOR_S = DONE_TTL_MS / 1000 - 5.0
REMEMBERED_ENQUEUES = 10_000


T = TypeVar("T")
P = ParamSpec("P")


class ClientError(Exception):
    """The client was used in a way it cannot serve; the message says what to do instead."""


class ClientNotOpen(ClientError, RuntimeError):
    pass


class DuplicateJobId(ClientError, ValueError):
    pass


class UnsafeArguments(ClientError, ValueError):
    """Job arguments that JSON cannot carry (an integer beyond 64 bits, an object, NaN)."""


class RedisOutOfMemory(ClientError):
    """Redis refused the client's write because it is full (``maxmemory`` with ``noeviction``):
    nothing was enqueued (or put on the menu), so nothing was charged. Free memory in Redis or
    raise its ``maxmemory`` (docs/operations.md), then try again."""


@contextlib.contextmanager
def _refused_for_memory(what: str) -> Iterator[None]:
    """Redis's refusal for memory as the client's own exception, not redis-py's raw error."""
    try:
        yield
    except ResponseError as exc:
        if not is_out_of_memory(exc):
            raise
        raise RedisOutOfMemory(
            f"Redis is out of memory (maxmemory reached): it refused to {what}; free memory in Redis "
            "or raise its maxmemory, then try again"
        ) from None


class NoWorkerRunning(ClientError, RuntimeError):
    """No worker beats on the client's queue, so a job would wait out its whole deadline.

    Raised before anything is enqueued or charged, as fast as the command line says it (the same
    check: ``worker.state.health.any_alive``). ``require_worker=False`` enqueues anyway, for a
    worker that starts later.
    """

    def __init__(self, queue_name: str, redis_url: str) -> None:
        super().__init__(
            f"no worker is running on queue {queue_name} at {redact_url(redis_url)}; start one with "
            "`research-worker run`, or build the client with require_worker=False to queue jobs "
            "for a worker that starts later"
        )
        self.queue_name = queue_name


class _Unset:
    pass


UNSET: Final = _Unset()


class ResearchClient(Verifies):
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
        require_worker: bool = True,
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
        self.require_worker = require_worker
        self._redis: ArqRedis | None = None
        self._enqueuer: Enqueuer | None = None
        self._results: ResultStore | None = None
        # When this client enqueued each job (monotonic s), for a wait that needs no first read.
        self._enqueued_at: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._workers = health.WorkerWatch()  # waits out a Redis restart for a worker seen before

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

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def redis(self) -> ArqRedis:
        if self._redis is None:
            raise ClientNotOpen("open the client first: `async with ResearchClient(...) as client:`")
        return self._redis

    async def search(
        self,
        report_id: str,
        query: str,
        max_results: int = DEFAULT_MAX_RESULTS,
        org_id: str | None = None,
        *,
        trace_parent: str | None = None,
    ) -> JsonObject:
        # The job clamps max_results (jobs/search.py); the client sends what it was given.
        kwargs: JobArguments = {"report_id": report_id, "query": query, "max_results": max_results}
        if org_id is not None:
            kwargs["org_id"] = org_id
        return await self._run(WEB_SEARCH, kwargs, self._new_job_id(), None, trace_parent)

    async def fetch(
        self,
        report_id: str,
        url: str,
        extract: str = DEFAULT_EXTRACT,
        *,
        fresh: bool = False,
        offset: int | None = None,
        max_chars: int | None = None,
        find: str | None = None,
        format: str | None = None,
        render: bool = False,
        trace_parent: str | None = None,
    ) -> JsonObject:
        """One piece of the page (from ``offset``, at most ``max_chars``), or the matches of ``find``,
        in ``format`` ("markdown" or "text"), read by a browser with ``render``; arguments left out
        take the job's defaults. The job joins the caller's trace: ``trace_parent`` (a W3C
        traceparent), else the current OpenTelemetry span's, when there is one."""
        kwargs: JobArguments = {"report_id": report_id, "url": url, "extract": extract}
        if fresh:
            kwargs["fresh"] = True
        if render:
            kwargs["render"] = True
        optional = {"offset": offset, "max_chars": max_chars, "find": find, "format": format}
        kwargs.update({name: value for name, value in optional.items() if value is not None})
        return await self._run(FETCH_PAGE, kwargs, self._new_job_id(), None, trace_parent)

    async def seed_urls(self, report_id: str, urls: Iterable[str]) -> int:
        """Put the briefing's URLs on the report's menu; returns how many were new.

        Only https URLs the guardian would parse enter the menu; others are skipped silently.
        """
        parse_report_id(report_id)
        if isinstance(urls, str):
            raise ClientError("seed_urls takes a list of URLs, not one string")
        window = Settings(budget_window_s=self.settings.budget_window_s, queue_name=self.settings.queue_name)
        with _refused_for_memory("record the briefing's URLs"):
            return await Menu(self.redis, window).record(report_id, [u for u in urls if isinstance(u, str)])

    async def set_domains(
        self, report_id: str, *, allowed: Iterable[str] = (), blocked: Iterable[str] = ()
    ) -> None:
        """Set one report's own domain lists for its budget window, replacing any it had.

        They narrow the deployment's lists, never widen them: ``blocked`` adds domains no fetch of
        the report may reach (redirect hops included) and whose search results it never sees;
        a non-empty ``allowed`` is a list every such host must also be on. A domain covers its
        subdomains. Raises ClientError for an entry that is not a domain name.
        """
        parse_report_id(report_id)
        for name, value in (("allowed", allowed), ("blocked", blocked)):
            if isinstance(value, str):
                raise ClientError(f"set_domains takes a list of domains for {name}, not one string")
        try:
            # Only the report's own lists are written; the deployment's stay with the workers.
            lists = ReportDomains(
                self.redis, window_s=self.settings.budget_window_s, deployment=DomainPolicy()
            )
            await lists.set(report_id, allowed=allowed, blocked=blocked)
        except DomainListError as exc:
            raise ClientError(f"set_domains: {exc}") from None

    @overload
    async def call(
        self,
        name: object,
        arguments: object,
        *,
        shape: Literal["json"] = "json",
        report_id: str,
        org_id: str | None = None,
        wait_s: float | None = None,
        trace_parent: str | None = None,
    ) -> str: ...

    @overload
    async def call(
        self,
        name: object,
        arguments: object,
        *,
        shape: Literal["anthropic"],
        report_id: str,
        org_id: str | None = None,
        wait_s: float | None = None,
        trace_parent: str | None = None,
    ) -> list[dict[str, Any]]: ...

    @overload
    async def call(
        self, name: str, arguments: Mapping[str, Any], *, wait_s: float | None = None
    ) -> JsonObject: ...

    async def call(
        self,
        name: object,
        arguments: object,
        *,
        report_id: str | _Unset = UNSET,
        org_id: str | None = None,
        wait_s: float | None = None,
        shape: str = "json",
        trace_parent: str | None = None,
    ) -> str | list[dict[str, Any]] | JsonObject:
        """Run a model's tool call as it came and return what to hand back to the model.

        ``name`` and ``arguments`` (a dict, or the JSON text of one) are the model's; ``report_id``
        (and ``org_id`` for searches) are the orchestrator's. Whatever the model sent, the answer is
        a result: an unknown tool, arguments that are not a JSON object, or a model trying to set
        the report is an ``invalid_request`` result, and nothing is enqueued or charged.

        ``shape="json"`` returns the result's JSON text; ``shape="anthropic"`` returns the content
        blocks of an Anthropic Messages API ``tool_result`` (``worker.shapes``).

        Without ``report_id`` this is the low-level form kept for callers that put the report in
        the arguments themselves; it is ``run`` and returns the result object.
        """
        if isinstance(report_id, _Unset):
            if not isinstance(name, str) or not isinstance(arguments, Mapping):
                raise ClientError("call(name, arguments, report_id=...) runs a model's tool call")
            return await self.run(name, dict(arguments), wait_s=wait_s)
        try:
            wanted = Shape(shape)
        except ValueError:
            raise ClientError(f"shape must be one of {', '.join(s.value for s in Shape)}") from None
        result = await self.call_result(
            name, arguments, report_id=report_id, org_id=org_id, wait_s=wait_s, trace_parent=trace_parent
        )
        return anthropic_blocks(result) if wanted is Shape.ANTHROPIC else _json(result)

    async def call_result(
        self,
        name: object,
        arguments: object,
        *,
        report_id: str,
        org_id: str | None = None,
        wait_s: float | None = None,
        trace_parent: str | None = None,
    ) -> JsonObject:
        """``call`` without the shaping: the result object of a model's tool call."""
        report = parse_report_id(report_id)
        job_id = self._new_job_id()
        if not isinstance(name, str) or name not in MODEL_TOOLS:
            unknown = InvalidRequest(f"there is no tool by that name; the tools are {', '.join(MODEL_TOOLS)}")
            return error_result("unknown", report, job_id, unknown)
        try:
            given = model_arguments(arguments)
        except InvalidRequest as unreadable:
            return error_result(name, report, job_id, unreadable)
        if (refusal := check_call(name, given)) is not None:
            return error_result(name, report, job_id, refusal, about_of(name, given))
        kwargs = {"report_id": report, **given}
        if org_id is not None:
            kwargs["org_id"] = org_id  # whose search key pays, and whose daily caps are charged
        return await self._run(name, kwargs, job_id, wait_s, trace_parent)

    async def run(
        self, function: str, kwargs: Mapping[str, Any], *, wait_s: float | None = None
    ) -> JsonObject:
        """Enqueue one job (``kwargs`` include ``report_id``) and wait for its result object."""
        return await self._run(function, dict(kwargs), self._new_job_id(), wait_s)

    async def _run(
        self,
        function: str,
        kwargs: JobArguments,
        job_id: str,
        wait_s: float | None,
        trace_parent: str | None = None,
    ) -> JsonObject:
        if TRACEPARENT not in kwargs and (parent := _trace_parent(trace_parent)) is not None:
            kwargs[TRACEPARENT] = parent
        if self.require_worker and not await self._workers.ready(self.redis, self.settings.queue_name):
            raise NoWorkerRunning(self.settings.queue_name, self.redis_url or "")
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
            with _refused_for_memory(f"enqueue the {function} job"):
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
    ) -> JsonObject:
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
        if not fresh and (done := await results.read_json(job_id)) is not None:
            return done
        while (left := deadline - time.monotonic()) > 0:
            block = min(left, MAX_BLOCK_S)
            # The wake-up is a blocking move, a write: Redis at its limit refuses it like an enqueue.
            with contextlib.suppress(TimeoutError), _refused_for_memory("wait for the job's result"):
                woken = await asyncio.wait_for(results.wait_json(job_id, block), block + 5.0)
                if woken is not None:
                    return woken
        # The wake-up may have gone to another waiter or expired: the result key is the record.
        if (done := await results.read_json(job_id)) is not None:
            return done
        late = Timeout(
            f"no result within {limit:g} s; the job may still finish and write {keys.result(job_id)}"
        )
        return error_result(function, report_id if isinstance(report_id, str) else None, job_id, late, about)

    async def result(self, job_id: str) -> JsonObject | None:
        """A finished job's result from its result key, or None (not finished, or expired)."""
        return await self._open_part(self._results).read_json(job_id)

    async def workers_alive(self) -> bool:
        """True while at least one worker beats on this client's queue."""
        return await health.any_alive(self.redis, self.settings.queue_name)

    def _new_job_id(self) -> str:
        return f"{self._job_id_prefix}{uuid.uuid4().hex}"

    def _open_part(self, part: T | None) -> T:
        if part is None:
            raise ClientNotOpen("open the client first: `async with ResearchClient(...) as client:`")
        return part


def _blocking(
    method: Callable[Concatenate[ResearchClient, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[SyncResearchClient, P], T]:
    """A method of the async client as a method of the blocking one (its overloads included)."""

    def blocking(self: SyncResearchClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._submit(method(self._client, *args, **kwargs))

    functools.update_wrapper(blocking, method)  # its name, docstring and signature for help()
    return blocking


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

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The async client's methods, each blocking until its answer: the same arguments and answers,
    # declared once (on ResearchClient), so the two clients cannot drift apart.
    search = _blocking(ResearchClient.search)
    fetch = _blocking(ResearchClient.fetch)
    seed_urls = _blocking(ResearchClient.seed_urls)
    verify = _blocking(ResearchClient.verify)
    set_domains = _blocking(ResearchClient.set_domains)
    call = _blocking(ResearchClient.call)
    run = _blocking(ResearchClient.run)
    result = _blocking(ResearchClient.result)
    workers_alive = _blocking(ResearchClient.workers_alive)

    def _submit(self, work: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            work.close()
            raise ClientNotOpen("open the client first: `with SyncResearchClient(...) as client:`")
        # The job runs in the caller's context, so its OpenTelemetry span is the job's parent.
        caller = contextvars.copy_context()

        async def in_caller_context() -> T:
            return await asyncio.get_running_loop().create_task(work, context=caller)

        future: Future[T] = asyncio.run_coroutine_threadsafe(in_caller_context(), self._loop)
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


def _trace_parent(given: str | None) -> str | None:
    """The trace a job joins: ``given`` when it is a valid traceparent, else the caller's current
    OpenTelemetry span's (none where the caller does not trace)."""
    if given is None:
        return current_traceparent()
    parent = parse_traceparent(given)
    if parent is None:
        raise ClientError("trace_parent must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)")
    return parent


def error_result(
    tool: str, report_id: str | None, job_id: str, error: ResearchError, about: About | None = None
) -> JsonObject:
    """The error result a job would have written, for a call the client answers itself."""
    return as_json(ErrorResult.of(Head(tool, report_id, job_id), error, about))


def _json(result: JsonObject) -> str:
    return dumps(result).decode()


def _text(name: str, value: object, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value):
        raise ClientError(f"{name} must be a non-empty string")
    return value


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise ClientError(f"{name} must be a positive number of seconds")
    return float(value)
