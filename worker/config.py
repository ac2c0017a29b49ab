"""Settings: one frozen object built once from the environment at start-up and passed down.

No other module reads ``os.environ``. A bad value raises ``ConfigError`` with one line that names
the variable, so a misconfigured replica stops at start-up instead of failing jobs later.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar, overload
from urllib.parse import urlsplit

import orjson

from worker.limits import REPORT_ID
from worker.redact import redact_url as redact_url  # re-exported: callers import it from here
from worker.redact import redact_urls
from worker.state.redis_conn import RedisTarget, parse_redis_url

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
DEFAULT_SEARCH_MODEL = "openai/gpt-4.1-nano"
DEFAULT_USER_AGENT = (
    "research-worker/0.1 (+https://github.com/research-worker/research-worker/blob/main/docs/site-owners.md)"
)

# Search runs on cheap models only: a search is a citation lookup, and the model's prose is thrown
# away, so a frontier model would only add cost. Widening this list is a code change, on purpose.
SEARCH_MODEL_ALLOW_LIST = frozenset(
    {
        "openai/gpt-4.1-nano",
        "openai/gpt-4.1-mini",
        "openai/gpt-4o-mini",
        "openai/gpt-5-nano",
        "google/gemini-2.5-flash-lite",
        "google/gemini-2.0-flash-001",
        "google/gemini-2.0-flash-lite-001",
        "mistralai/mistral-small-3.2-24b-instruct",
        "meta-llama/llama-3.3-70b-instruct",
        "qwen/qwen3-30b-a3b-instruct-2507",
    }
)


class SearchProvider(StrEnum):
    """Who answers web_search: OpenRouter's web plugin, its server tool, or the operator's SearXNG."""

    OPENROUTER_PLUGIN = "openrouter-plugin"
    OPENROUTER_TOOL = "openrouter-tool"
    SEARXNG = "searxng"


# The server tool's engines, as OpenRouter documents them; "auto" lets OpenRouter choose.
SEARCH_ENGINES = frozenset({"auto", "native", "exa", "firecrawl", "parallel"})


class RenderMode(StrEnum):
    """RESEARCH_RENDER: whether fetch_page may read a page in a headless browser (docs/render.md)."""

    OFF = "off"  # render: true is refused with invalid_request
    ON = "on"  # render when a call asks
    AUTO = "auto"  # also render, unasked, a page whose static text is a script shell


class UserUrls(StrEnum):
    """RESEARCH_MCP_USER_URLS: a URL an MCP user names that the session has not seen."""

    ASK = "ask"  # ask the user through MCP elicitation
    ALLOW = "allow"  # one user on their own machine: every URL the model names
    NEVER = "never"  # the menu stays strict


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


class ConfigError(ValueError):
    """A configuration value is unusable; the message names the variable.

    Every URL in the message loses its password here, whatever built the message: a value is
    quoted to say what was wrong with it, and ``SEARXNG_URL`` or ``OPENROUTER_BASE_URL`` may carry
    credentials.
    """

    def __init__(self, message: str) -> None:
        super().__init__(redact_urls(message))


# Upper bounds of the numeric settings. Every one reaches Redis (a TTL in EXPIRE or PSETEX, a
# counter, a job's timeout in arq's keys) or sizes a buffer, and Redis refuses a TTL whose
# milliseconds overflow: RESEARCH_RESULT_TTL_S=1e17 started a worker whose every result write
# failed. A bound stops start-up instead, far above any sensible value and far below any overflow.
MAX_TTL_S = 366 * 86_400  # budget windows, results, the page cache: a year and a day
MAX_BUDGET = 1_000_000  # searches or fetches per report
MAX_JOB_SLOTS = 10_000
MAX_HOST_SLOTS = 1_000
MAX_BODY_BYTES = 1 << 30
MAX_TEXT_CHARS = 100_000_000
MAX_REDIRECTS = 50
MAX_WAIT_S = 3_600.0  # a network timeout or a shutdown's grace
MAX_CPU_S = 600.0
MAX_CLIENT_WAIT_S = 86_400.0
# A setting read with no bound of its own gets this one.
MAX_COUNT = 1_000_000_000


class Secret:
    """A string that never shows itself in a repr, a log line or an exception message."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class ArchiveDirectory:
    """The evidence archive in a local directory (``worker.archive``)."""

    path: str


@dataclass(frozen=True)
class ArchiveBucket:
    """The evidence archive in S3-compatible object storage: ``s3://bucket/prefix``."""

    bucket: str
    prefix: str  # "" or ending in "/"


ArchiveTarget = ArchiveDirectory | ArchiveBucket


@dataclass(frozen=True)
class Settings:
    redis_url: str | None = None
    queue_name: str = "research:queue"
    # Job slots are cheap (a coroutine and at most one body each): the scarce resources have gates
    # of their own (reduce slots for the CPU, per-host slots for the network), so a worker takes
    # many jobs at once and a refusal or a small page never waits in Redis behind heavy ones.
    max_jobs: int = 64
    search_budget: int = 15
    fetch_budget: int = 25
    budget_window_s: int = 86_400
    fetch_max_bytes: int = 2_097_152
    fetch_max_pdf_bytes: int = 16_777_216
    fetch_max_chars: int = 40_000
    read_budget_chars: int = 2_000_000
    fetch_max_redirects: int = 5
    fetch_timeout_s: float = 20.0
    search_timeout_s: float = 60.0
    reduce_cpu_budget_s: float = 3.0
    result_ttl_s: int = 86_400
    cache_ttl_s: int = 900
    # The page cache's own Redis (``allkeys-lru``) for large deployments; None: the main Redis.
    cache_redis_url: str | None = None
    host_concurrency: int = 4
    guardian_allow_cidrs: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    ca_bundle: str | None = None
    url_menu: bool = True
    blocked_domains: frozenset[str] = frozenset()
    allowed_domains: frozenset[str] = frozenset()  # empty: every domain the guardian allows
    robots: bool = False
    metrics_port: int | None = None
    dashboard_auth: tuple[str, Secret] | None = None
    openrouter_api_key: Secret = field(default_factory=lambda: Secret(""))
    openrouter_base_url: str = DEFAULT_BASE_URL
    search_model: str = DEFAULT_SEARCH_MODEL
    usage_source: str = "mcp-research"
    search_provider: SearchProvider = SearchProvider.OPENROUTER_PLUGIN
    search_engine: str | None = None
    searxng_url: str | None = None
    search_fallback: SearchProvider | None = None
    org_keys: Mapping[str, Secret] = field(default_factory=lambda: MappingProxyType({}))
    http_referer: str = "https://github.com/research-worker/research-worker"
    app_title: str = "research-worker"
    user_agent: str = DEFAULT_USER_AGENT
    shutdown_grace_s: float | None = None
    worker_id: str = ""
    log_level: str = "INFO"
    log_format: LogFormat | None = None  # None: text on a terminal, JSON otherwise
    runtime_dir: str | None = None  # XDG_RUNTIME_DIR: where an embedded Redis leaves its address
    # Where job spans go (OTLP/HTTP), from the standard OTEL_* variables; None: tracing is off.
    otel_traces_endpoint: str | None = None
    # The evidence archive. Off unless configured here; from_env defaults it to the user's data
    # directory (RESEARCH_ARCHIVE), so tests that build Settings directly write nothing.
    archive: ArchiveTarget | None = None
    archive_days: int = 90
    archive_endpoint: str | None = None
    render: RenderMode = RenderMode.OFF
    render_budget: int = 5  # renders per report, besides the fetch each one also costs
    chromium: str = "chromium"  # the browser a render worker runs: a path, or a name on PATH
    render_max_requests: int = 200  # connections (proxy tunnels) one render may open
    render_max_bytes: int = 16_777_216  # bytes one render's connections may carry, both ways
    render_memory_mb: int = 1024  # the browser's whole process tree, resident
    # `research-worker mcp --http` (docs/mcp.md): the tokens file is read when that server starts.
    mcp_tokens_file: str | None = None
    mcp_origins: tuple[str, ...] = ()
    mcp_rate_per_minute: int = 120
    mcp_max_body_bytes: int = 262_144
    # A URL the MCP user names that the session has not seen (worker/mcp/consent.py).
    mcp_user_urls: UserUrls = UserUrls.ASK
    # Per organization and UTC day (worker/state/budget.py); None: no limit.
    org_daily_searches: int | None = None
    org_daily_fetches: int | None = None

    @property
    def job_timeout_s(self) -> float:
        """arq's hard limit: the slower tool's own time budget plus room to write the result."""
        return max(self.fetch_deadline_s, self.search_deadline_s) + 10.0

    @property
    def reduce_slots(self) -> int:
        """Reductions of any size one worker runs at once (small bodies have an express lane
        besides, ``worker.runtime.cpu_slots``). One: reduction is CPU-bound on one event loop, so a second
        adds no throughput, only memory and a longer turn of the loop for every other job (each
        reduction runs a slice per turn), and the smallest page waiting goes next anyway."""
        return 1

    @property
    def fetch_deadline_s(self) -> float:
        """A fetch job's whole time in the worker: the network's bound, one reduction's worth of
        waiting for a reduce slot, the reduction's own CPU budget, and 2 s for the rest.

        It does not grow with ``max_jobs``: under a flood of heavy pages a page that waits longer
        for a slot is reduced with the time it has left (truncated), or ends in ``timeout``,
        rather than every job's deadline stretching to the length of the line.
        """
        return self.fetch_timeout_s + 2 * self.reduce_cpu_budget_s + 2.0

    @property
    def search_deadline_s(self) -> float:
        return self.search_timeout_s + 2.0

    @property
    def grace_s(self) -> float:
        """How long SIGTERM waits for running jobs: by default, long enough for the slowest job."""
        return self.shutdown_grace_s if self.shutdown_grace_s is not None else self.job_timeout_s

    @property
    def redis_target(self) -> RedisTarget:
        return _redis_target(self.redis_url)

    @property
    def render_queue(self) -> str:
        """Where fetch workers hand renders to the render workers (``research-worker run --render``)."""
        return f"{self.queue_name}:render"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        return cls.read(Env(os.environ if env is None else env))

    @classmethod
    def read(cls, e: Env) -> Settings:
        settings = cls(
            redis_url=e.parse("REDIS_URL", None, _redis_url),
            cache_redis_url=e.parse("RESEARCH_CACHE_REDIS_URL", None, _redis_url),
            queue_name=e.name("RESEARCH_QUEUE", cls.queue_name),
            max_jobs=e.integer("RESEARCH_MAX_JOBS", cls.max_jobs, minimum=1, maximum=MAX_JOB_SLOTS),
            search_budget=e.integer(
                "RESEARCH_SEARCH_BUDGET", cls.search_budget, minimum=1, maximum=MAX_BUDGET
            ),
            fetch_budget=e.integer("RESEARCH_FETCH_BUDGET", cls.fetch_budget, minimum=1, maximum=MAX_BUDGET),
            budget_window_s=e.integer(
                "RESEARCH_BUDGET_WINDOW_S", cls.budget_window_s, minimum=1, maximum=MAX_TTL_S
            ),
            fetch_max_bytes=e.integer(
                "RESEARCH_FETCH_MAX_BYTES", cls.fetch_max_bytes, minimum=1, maximum=MAX_BODY_BYTES
            ),
            fetch_max_pdf_bytes=e.integer(
                "RESEARCH_FETCH_MAX_PDF_BYTES", cls.fetch_max_pdf_bytes, minimum=1, maximum=MAX_BODY_BYTES
            ),
            fetch_max_chars=e.integer(
                "RESEARCH_FETCH_MAX_CHARS", cls.fetch_max_chars, minimum=1, maximum=MAX_TEXT_CHARS
            ),
            read_budget_chars=e.integer(
                "RESEARCH_READ_BUDGET_CHARS", cls.read_budget_chars, minimum=0, maximum=MAX_COUNT
            ),
            fetch_max_redirects=e.integer(
                "RESEARCH_FETCH_MAX_REDIRECTS", cls.fetch_max_redirects, minimum=0, maximum=MAX_REDIRECTS
            ),
            fetch_timeout_s=e.seconds("RESEARCH_FETCH_TIMEOUT_S", cls.fetch_timeout_s, maximum=MAX_WAIT_S),
            search_timeout_s=e.seconds("RESEARCH_SEARCH_TIMEOUT_S", cls.search_timeout_s, maximum=MAX_WAIT_S),
            reduce_cpu_budget_s=e.seconds(
                "RESEARCH_REDUCE_CPU_BUDGET_S", cls.reduce_cpu_budget_s, maximum=MAX_CPU_S
            ),
            result_ttl_s=e.integer("RESEARCH_RESULT_TTL_S", cls.result_ttl_s, minimum=1, maximum=MAX_TTL_S),
            cache_ttl_s=e.integer("RESEARCH_CACHE_TTL_S", cls.cache_ttl_s, minimum=0, maximum=MAX_TTL_S),
            host_concurrency=e.integer(
                "RESEARCH_HOST_CONCURRENCY", cls.host_concurrency, minimum=1, maximum=MAX_HOST_SLOTS
            ),
            guardian_allow_cidrs=e.parse("RESEARCH_GUARDIAN_ALLOW_CIDRS", (), _parse_cidrs),
            ca_bundle=e.parse("RESEARCH_CA_BUNDLE", None, _readable_file),
            url_menu=e.switch("RESEARCH_URL_MENU", True),
            blocked_domains=e.parse("RESEARCH_BLOCKED_DOMAINS", frozenset(), _parse_domains),
            allowed_domains=e.parse("RESEARCH_ALLOWED_DOMAINS", frozenset(), _parse_domains),
            robots=e.switch("RESEARCH_ROBOTS", False),
            metrics_port=e.parse("RESEARCH_METRICS_PORT", None, _port),
            dashboard_auth=e.parse("RESEARCH_DASHBOARD_AUTH", None, _user_password),
            openrouter_api_key=Secret(e.text("OPENROUTER_API_KEY") or ""),
            openrouter_base_url=e.parse("OPENROUTER_BASE_URL", DEFAULT_BASE_URL, _http_url),
            search_model=e.parse("RESEARCH_SEARCH_MODEL", DEFAULT_SEARCH_MODEL, _allowed_model),
            usage_source=e.name("RESEARCH_USAGE_SOURCE", cls.usage_source),
            search_provider=e.parse("RESEARCH_SEARCH_PROVIDER", cls.search_provider, _provider),
            search_engine=e.parse("RESEARCH_SEARCH_ENGINE", None, _engine),
            searxng_url=e.parse("SEARXNG_URL", None, _http_url),
            search_fallback=e.parse("RESEARCH_SEARCH_FALLBACK", None, _provider),
            org_keys=load_org_keys(e.text("RESEARCH_ORG_KEYS_FILE")),
            http_referer=e.parse("RESEARCH_HTTP_REFERER", cls.http_referer, _http_url),
            app_title=e.text("RESEARCH_APP_TITLE") or cls.app_title,
            user_agent=e.parse("RESEARCH_USER_AGENT", cls.user_agent, _header_value),
            shutdown_grace_s=e.seconds("RESEARCH_SHUTDOWN_GRACE_S", None, maximum=MAX_WAIT_S, zero=True),
            worker_id=e.name("RESEARCH_WORKER_ID", default_worker_id()),
            log_level=e.parse("RESEARCH_LOG_LEVEL", "INFO", _log_level),
            log_format=e.parse("RESEARCH_LOG_FORMAT", None, LogFormat),
            runtime_dir=e.text("XDG_RUNTIME_DIR"),
            otel_traces_endpoint=otel_traces_endpoint(e),
            archive=e.parse("RESEARCH_ARCHIVE", default_archive(e), _archive_target),
            archive_days=e.integer("RESEARCH_ARCHIVE_DAYS", cls.archive_days, minimum=1),
            archive_endpoint=e.parse("RESEARCH_ARCHIVE_ENDPOINT", None, _http_url),
            render=e.parse("RESEARCH_RENDER", cls.render, _render_mode),
            render_budget=e.integer("RESEARCH_RENDER_BUDGET", cls.render_budget, minimum=1),
            chromium=e.text("RESEARCH_CHROMIUM") or cls.chromium,
            render_max_requests=e.integer("RESEARCH_RENDER_MAX_REQUESTS", cls.render_max_requests, minimum=1),
            render_max_bytes=e.integer("RESEARCH_RENDER_MAX_BYTES", cls.render_max_bytes, minimum=1),
            render_memory_mb=e.integer("RESEARCH_RENDER_MEMORY_MB", cls.render_memory_mb, minimum=64),
            mcp_tokens_file=e.text("RESEARCH_MCP_TOKENS_FILE"),
            mcp_origins=e.parse("RESEARCH_MCP_ORIGINS", (), _origins),
            mcp_rate_per_minute=e.integer("RESEARCH_MCP_RATE_PER_MIN", cls.mcp_rate_per_minute, minimum=1),
            mcp_max_body_bytes=e.integer("RESEARCH_MCP_MAX_BODY_BYTES", cls.mcp_max_body_bytes, minimum=1024),
            mcp_user_urls=e.parse("RESEARCH_MCP_USER_URLS", cls.mcp_user_urls, _user_urls),
            org_daily_searches=e.parse("RESEARCH_ORG_DAILY_SEARCHES", None, _daily_cap),
            org_daily_fetches=e.parse("RESEARCH_ORG_DAILY_FETCHES", None, _daily_cap),
        )
        settings.check_search()
        if settings.archive_endpoint is not None and not isinstance(settings.archive, ArchiveBucket):
            raise ConfigError("RESEARCH_ARCHIVE_ENDPOINT: is set, but RESEARCH_ARCHIVE is not an s3:// URL")
        return settings

    def check_search(self) -> None:
        """The search settings that only make sense together."""
        uses = {self.search_provider, self.search_fallback}
        if SearchProvider.SEARXNG in uses and self.searxng_url is None:
            variable = (
                "RESEARCH_SEARCH_PROVIDER"
                if self.search_provider is SearchProvider.SEARXNG
                else "RESEARCH_SEARCH_FALLBACK"
            )
            raise ConfigError(f"{variable}: searxng needs SEARXNG_URL, the address of the SearXNG instance")
        if self.search_fallback is not None and self.search_fallback == self.search_provider:
            raise ConfigError(
                f"RESEARCH_SEARCH_FALLBACK: {self.search_fallback.value!r} is already the primary "
                "provider (RESEARCH_SEARCH_PROVIDER); a fallback must be a different one"
            )


@dataclass(frozen=True)
class ClientSettings:
    """What a client needs and nothing more: where Redis is, the queue, and how long to wait.

    An orchestrator shares its environment with many things; a worker variable it sets wrong (a
    budget, a fetch cap) is none of its client's business, so only these are read.
    """

    redis_url: str | None = None
    queue_name: str = Settings.queue_name
    wait_s: float = 120.0
    budget_window_s: int = Settings.budget_window_s  # how long a seeded menu entry lives
    runtime_dir: str | None = None

    @property
    def redis_target(self) -> RedisTarget:
        return _redis_target(self.redis_url)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ClientSettings:
        return cls.read(Env(os.environ if env is None else env))

    @classmethod
    def read(cls, e: Env) -> ClientSettings:
        return cls(
            redis_url=e.parse("REDIS_URL", None, _redis_url),
            queue_name=e.name("RESEARCH_QUEUE", cls.queue_name),
            wait_s=e.seconds("RESEARCH_CLIENT_WAIT_S", cls.wait_s, maximum=MAX_CLIENT_WAIT_S),
            budget_window_s=e.integer(
                "RESEARCH_BUDGET_WINDOW_S", cls.budget_window_s, minimum=1, maximum=MAX_TTL_S
            ),
            runtime_dir=e.text("XDG_RUNTIME_DIR"),
        )

    @classmethod
    def of(cls, settings: Settings) -> ClientSettings:
        """The client's part of a worker's settings (the command line reads those)."""
        return cls(
            redis_url=settings.redis_url,
            queue_name=settings.queue_name,
            budget_window_s=settings.budget_window_s,
            runtime_dir=settings.runtime_dir,
        )


T = TypeVar("T")


def otel_traces_endpoint(e: Env) -> str | None:
    """The OTLP/HTTP traces URL the OpenTelemetry specification's variables name, or None when they
    turn tracing off: ``OTEL_SDK_DISABLED=true``, ``OTEL_TRACES_EXPORTER`` without ``otlp``, or no
    endpoint. ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is used as written; the general
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` gets ``/v1/traces`` appended, as the specification says."""
    if (e.text("OTEL_SDK_DISABLED") or "").strip().lower() == "true":
        return None
    exporters = (e.text("OTEL_TRACES_EXPORTER") or "otlp").replace(" ", "").lower().split(",")
    if "otlp" not in exporters:
        return None
    traces = e.parse("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None, _http_url)
    if traces:
        return traces
    base = e.parse("OTEL_EXPORTER_OTLP_ENDPOINT", None, _http_url)
    return base.rstrip("/") + "/v1/traces" if base else None


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class NumberBounds:
    """The range one numeric setting accepts, as ``Env`` read it (for tests and docs)."""

    name: str
    integer: bool
    minimum: float
    maximum: float
    minimum_allowed: bool  # False for seconds: the minimum itself (0) is refused


class Env:
    """Reads one variable at a time and turns a bad value into a ConfigError naming it.

    ``numbers`` records every numeric setting read and its bounds, so a test can walk the edges
    of each one, including settings added later.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env
        self.numbers: dict[str, NumberBounds] = {}

    def text(self, name: str) -> str | None:
        value = self._env.get(name)
        if value is None or value.strip() == "":
            return None
        return value.strip()

    def parse(self, name: str, default: T, parser: Callable[[str], T]) -> T:
        raw = self.text(name)
        if raw is None:
            return default
        try:
            return parser(raw)
        except (ValueError, OSError) as exc:
            raise ConfigError(f"{name}: {exc}") from None

    def integer(self, name: str, default: int, *, minimum: int, maximum: int = MAX_COUNT) -> int:
        self.numbers[name] = NumberBounds(name, True, minimum, maximum, True)

        def parse_int(raw: str) -> int:
            try:
                value = int(raw.replace("_", ""))
            except ValueError:
                raise ValueError(f"{raw!r} is not an integer") from None
            if value < minimum:
                kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
                raise ValueError(f"{raw!r} must be {kind}")
            if value > maximum:
                raise ValueError(f"{shown_number(raw)} is more than {maximum:,}, the most this setting takes")
            return value

        return self.parse(name, default, parse_int)

    @overload
    def seconds(self, name: str, default: float, *, maximum: float = ..., zero: bool = ...) -> float: ...

    @overload
    def seconds(
        self, name: str, default: None, *, maximum: float = ..., zero: bool = ...
    ) -> float | None: ...

    def seconds(
        self, name: str, default: float | None, *, maximum: float = MAX_WAIT_S, zero: bool = False
    ) -> float | None:
        """A number of seconds, more than 0 (or 0 itself with ``zero``) and at most ``maximum``."""
        self.numbers[name] = NumberBounds(name, False, 0.0, maximum, zero)

        def parse_seconds(raw: str) -> float:
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"{raw!r} is not a number of seconds") from None
            if zero and value == 0:
                return 0.0
            if not value > 0 or value == float("inf"):
                kind = "a number of seconds >= 0" if zero else "a positive number of seconds"
                raise ValueError(f"{raw!r} must be {kind}")
            if value > maximum:
                raise ValueError(
                    f"{shown_number(raw)} is more than {maximum:g} s, the most this setting takes"
                )
            return value

        return self.parse(name, default, parse_seconds)

    def switch(self, name: str, default: bool) -> bool:
        def parse_switch(raw: str) -> bool:
            lowered = raw.lower()
            if lowered in {"on", "true", "1", "yes"}:
                return True
            if lowered in {"off", "false", "0", "no"}:
                return False
            raise ValueError(f"{raw!r} must be 'on' or 'off'")

        return self.parse(name, default, parse_switch)

    def name(self, name: str, default: str) -> str:
        def parse_name(raw: str) -> str:
            if len(raw) > 200 or any(ch.isspace() or not ch.isprintable() for ch in raw):
                raise ValueError("must be at most 200 printable characters without spaces")
            return raw

        return self.parse(name, default, parse_name)


def shown_number(raw: str) -> str:
    """A number as given, quoted, or its first digits when it is long (a line, not a screenful)."""
    return repr(raw) if len(raw) <= 40 else repr(raw[:20] + "...")


def numeric_settings() -> dict[str, NumberBounds]:
    """Every numeric setting a worker or a client reads, with the bounds it is read with."""
    e = Env({})
    Settings.read(e)
    ClientSettings.read(e)
    return e.numbers


def _parse_domains(raw: str) -> frozenset[str]:
    from worker.guardian.domains import parse_domain_list

    return parse_domain_list(raw)


def _parse_cidrs(raw: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    from worker.guardian.policy import AddressPolicy

    networks = []
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=True))
        except ValueError as exc:
            raise ValueError(f"{part!r} is not a CIDR range ({exc})") from None
    AddressPolicy(networks)  # refuses a range inside a translation prefix, saying why
    return tuple(networks)


def default_archive(e: Env) -> ArchiveTarget | None:
    """A folder in the user's data directory (XDG_DATA_HOME, else ~/.local/share); off without either."""
    data_home = e.text("XDG_DATA_HOME")
    if data_home is None:
        home = e.text("HOME")
        if home is None:
            return None
        data_home = str(Path(home) / ".local" / "share")
    return ArchiveDirectory(str(Path(data_home) / "research-worker" / "archive"))


# An S3 bucket name (the rules for new buckets); a prefix of printable path segments, none of
# them "." or "..", so a prefix cannot climb out of itself on a service that resolves dot segments.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def _archive_target(raw: str) -> ArchiveTarget | None:
    if raw.lower() == "off":
        return None
    if raw.lower().startswith("s3://"):
        bucket, _, prefix = raw[5:].partition("/")
        if not _BUCKET.fullmatch(bucket) or ".." in bucket:
            raise ValueError(f"{bucket!r} is not an S3 bucket name (3-63 of a-z, 0-9, '.', '-')")
        segments = [part for part in prefix.split("/") if part]
        if len(prefix) > 512 or any(
            part in (".", "..") or not part.isprintable() or "\\" in part for part in segments
        ):
            raise ValueError("the prefix after the bucket must be printable path segments, none '.' or '..'")
        return ArchiveBucket(bucket, "".join(f"{part}/" for part in segments))
    if "\0" in raw or "://" in raw:
        raise ValueError(f"{raw!r} must be 'off', a directory, or s3://bucket/prefix")
    return ArchiveDirectory(str(Path(raw).absolute()))  # a "~" is the shell's to expand


def _provider(raw: str) -> SearchProvider:
    try:
        return SearchProvider(raw.lower())
    except ValueError:
        known = ", ".join(p.value for p in SearchProvider)
        raise ValueError(f"{raw!r} is not a search provider ({known})") from None


def _render_mode(raw: str) -> RenderMode:
    try:
        return RenderMode(raw.lower())
    except ValueError:
        raise ValueError(f"{raw!r} must be off, on or auto") from None


def _user_urls(raw: str) -> UserUrls:
    try:
        return UserUrls(raw.lower())
    except ValueError:
        raise ValueError(f"{raw!r} must be ask, allow or never") from None


def _daily_cap(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a whole number") from None
    if not 1 <= value <= MAX_COUNT:
        raise ValueError(f"{raw!r} must be 1..{MAX_COUNT} (unset it for no limit)")
    return value


def _engine(raw: str) -> str:
    if raw.lower() not in SEARCH_ENGINES:
        raise ValueError(f"{raw!r} is not a search engine ({', '.join(sorted(SEARCH_ENGINES))})")
    return raw.lower()


def load_org_keys(path: str | None) -> Mapping[str, Secret]:
    """``{org_id: key}`` from the key file; a bad file stops start-up, naming the entry, never a key."""
    if path is None:
        return MappingProxyType({})
    variable = "RESEARCH_ORG_KEYS_FILE"
    try:
        raw = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ConfigError(f"{variable}: cannot read {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError:
        raise ConfigError(f"{variable}: {path} is not JSON") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{variable}: must be a JSON object mapping org ids to keys")
    org_keys: dict[str, Secret] = {}
    for position, (org_id, key) in enumerate(raw.items(), start=1):
        # The org id is not shown when it is invalid: a file written backwards would show a key.
        if not REPORT_ID.fullmatch(org_id):
            raise ConfigError(
                f"{variable}: entry {position} has an org id that is not 1-200 letters, digits and -_.:"
            )
        if not isinstance(key, str) or not key or any(not ch.isprintable() or ch.isspace() for ch in key):
            raise ConfigError(f"{variable}: the key of org {org_id!r} must be one word of printable text")
        org_keys[org_id] = Secret(key)
    return MappingProxyType(org_keys)


def _origins(raw: str) -> tuple[str, ...]:
    """Web origins (``scheme://host[:port]``) allowed to call the MCP server, in the form browsers send."""
    origins = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        parts = urlsplit(item)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
            raise ValueError(
                f"{item!r} is not an origin such as https://app.example.org or http://localhost:3000"
            )
        if parts.query or parts.fragment or parts.username is not None:
            raise ValueError(f"{item!r} is not an origin: no path, query or credentials")
        parts.port  # noqa: B018 - a port that is not a number raises ValueError here
        origins.append(f"{parts.scheme}://{parts.netloc.lower()}")
    return tuple(origins)


def _readable_file(raw: str) -> str:
    with open(raw, "rb"):
        pass
    return raw


def _port(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a port number") from None
    if not 1 <= value <= 65535:
        raise ValueError(f"{raw!r} is not a port in 1..65535")
    return value


def _user_password(raw: str) -> tuple[str, Secret]:
    user, sep, password = raw.partition(":")
    if not sep or not user or not password:
        raise ValueError("must be 'user:password' with both parts non-empty")
    return user, Secret(password)


def _http_url(raw: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        # A value with an "@" may hold a password where no URL parser finds it: not shown at all.
        shown = "the value" if "@" in raw else repr(raw)
        raise ValueError(f"{shown} is not an http(s) URL")
    return raw.rstrip("/")


def _allowed_model(raw: str) -> str:
    if raw not in SEARCH_MODEL_ALLOW_LIST:
        allowed = ", ".join(sorted(SEARCH_MODEL_ALLOW_LIST))
        raise ValueError(f"{raw!r} is not on the allow-list of cheap search models ({allowed})")
    return raw


def _header_value(raw: str) -> str:
    if any(not ch.isprintable() for ch in raw):
        raise ValueError("must be printable text")
    return raw


def _log_level(raw: str) -> str:
    level = raw.upper()
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise ValueError(f"{raw!r} is not one of DEBUG, INFO, WARNING, ERROR")
    return level


def _redis_url(raw: str) -> str:
    """A Redis URL the connection can use: a bad one stops start-up, not the first connection."""
    parse_redis_url(raw)
    return raw


def _redis_target(url: str | None) -> RedisTarget:
    try:
        return parse_redis_url(url or DEFAULT_REDIS_URL)
    except ValueError as exc:  # settings built in code (the client's arguments) skip read()
        raise ConfigError(f"REDIS_URL: {exc}") from None
