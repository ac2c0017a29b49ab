"""The frozen settings record a worker reads once at start-up, and the client's smaller one."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from worker.config.env import Env, NumberBounds
from worker.config.files import default_archive, load_org_keys, readable_file
from worker.config.validators import (
    allowed_model,
    archive_target,
    daily_cap,
    engine,
    header_value,
    http_url,
    log_level,
    ocr_languages,
    origins,
    otel_traces_endpoint,
    parse_cidrs,
    parse_domains,
    port,
    provider,
    redis_target,
    redis_url,
    render_mode,
    user_password,
    user_urls,
)
from worker.config.values import (
    DEFAULT_BASE_URL,
    DEFAULT_SEARCH_MODEL,
    DEFAULT_USER_AGENT,
    MAX_BODY_BYTES,
    MAX_BUDGET,
    MAX_CLIENT_WAIT_S,
    MAX_COUNT,
    MAX_CPU_S,
    MAX_HOST_SLOTS,
    MAX_JOB_SLOTS,
    MAX_REDIRECTS,
    MAX_TEXT_CHARS,
    MAX_TTL_S,
    MAX_WAIT_S,
    ArchiveBucket,
    ArchiveTarget,
    ConfigError,
    LogFormat,
    RenderMode,
    SearchProvider,
    Secret,
    UserUrls,
)
from worker.state.redis_conn import RedisTarget


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
    embedded: bool = False  # RESEARCH_EMBEDDED: the embedded Redis always, never the default address
    # Where job spans go (OTLP/HTTP), from the standard OTEL_* variables; None: tracing is off.
    otel_traces_endpoint: str | None = None
    # The evidence archive. Off unless configured here; from_env defaults it to the user's data
    # directory (RESEARCH_ARCHIVE), so tests that build Settings directly write nothing.
    archive: ArchiveTarget | None = None
    archive_days: int = 90
    archive_endpoint: str | None = None
    archive_operator: str = ""  # who keeps the archive, in every file's warcinfo (worker.archive)
    render: RenderMode = RenderMode.OFF
    render_budget: int = 5  # renders per report, besides the fetch each one also costs
    chromium: str = "chromium"  # the browser a render worker runs: a path, or a name on PATH
    render_max_requests: int = 200  # connections (proxy tunnels) one render may open
    render_max_bytes: int = 16_777_216  # bytes one render's connections may carry, both ways
    render_memory_mb: int = 1024  # the browser's whole process tree, resident
    render_warm: int = 2  # browsers a render worker keeps launched ahead (one per render slot); 0: none
    # A rendered page is read once no request of it was in flight, nor its DOM changed, this long
    # after its load (jobs/render/settle.py).
    render_quiet_s: float = 0.2
    # `research-worker mcp --http` (docs/mcp.md): the tokens file is read when that server starts.
    mcp_tokens_file: str | None = None
    mcp_origins: tuple[str, ...] = ()
    mcp_rate_per_minute: int = 120
    mcp_max_body_bytes: int = 262_144
    # OCR of scans and images (docs/documents.md): on by default, Tesseract's language codes, "+"-joined.
    ocr: bool = True
    ocr_languages: str = "eng"
    ocr_budget_pages: int = 200  # pages OCR may read per report (its budget window)
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
        return redis_target(self.redis_url)

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
            redis_url=e.parse("REDIS_URL", None, redis_url),
            cache_redis_url=e.parse("RESEARCH_CACHE_REDIS_URL", None, redis_url),
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
            guardian_allow_cidrs=e.parse("RESEARCH_GUARDIAN_ALLOW_CIDRS", (), parse_cidrs),
            ca_bundle=e.parse("RESEARCH_CA_BUNDLE", None, readable_file),
            url_menu=e.switch("RESEARCH_URL_MENU", True),
            blocked_domains=e.parse("RESEARCH_BLOCKED_DOMAINS", frozenset(), parse_domains),
            allowed_domains=e.parse("RESEARCH_ALLOWED_DOMAINS", frozenset(), parse_domains),
            robots=e.switch("RESEARCH_ROBOTS", False),
            ocr=e.switch("RESEARCH_OCR", True),
            ocr_languages=e.parse("RESEARCH_OCR_LANGUAGES", cls.ocr_languages, ocr_languages),
            ocr_budget_pages=e.integer(
                "RESEARCH_OCR_BUDGET_PAGES", cls.ocr_budget_pages, minimum=0, maximum=MAX_COUNT
            ),
            metrics_port=e.parse("RESEARCH_METRICS_PORT", None, port),
            dashboard_auth=e.parse("RESEARCH_DASHBOARD_AUTH", None, user_password),
            openrouter_api_key=Secret(e.text("OPENROUTER_API_KEY") or ""),
            openrouter_base_url=e.parse("OPENROUTER_BASE_URL", DEFAULT_BASE_URL, http_url),
            search_model=e.parse("RESEARCH_SEARCH_MODEL", DEFAULT_SEARCH_MODEL, allowed_model),
            usage_source=e.name("RESEARCH_USAGE_SOURCE", cls.usage_source),
            search_provider=e.parse("RESEARCH_SEARCH_PROVIDER", cls.search_provider, provider),
            search_engine=e.parse("RESEARCH_SEARCH_ENGINE", None, engine),
            searxng_url=e.parse("SEARXNG_URL", None, http_url),
            search_fallback=e.parse("RESEARCH_SEARCH_FALLBACK", None, provider),
            org_keys=load_org_keys(e.text("RESEARCH_ORG_KEYS_FILE")),
            http_referer=e.parse("RESEARCH_HTTP_REFERER", cls.http_referer, http_url),
            app_title=e.text("RESEARCH_APP_TITLE") or cls.app_title,
            user_agent=e.parse("RESEARCH_USER_AGENT", cls.user_agent, header_value),
            shutdown_grace_s=e.seconds("RESEARCH_SHUTDOWN_GRACE_S", None, maximum=MAX_WAIT_S, zero=True),
            worker_id=e.name("RESEARCH_WORKER_ID", default_worker_id()),
            log_level=e.parse("RESEARCH_LOG_LEVEL", "INFO", log_level),
            log_format=e.parse("RESEARCH_LOG_FORMAT", None, LogFormat),
            runtime_dir=e.text("XDG_RUNTIME_DIR"),
            embedded=e.switch("RESEARCH_EMBEDDED", False),
            otel_traces_endpoint=otel_traces_endpoint(e),
            archive=e.parse("RESEARCH_ARCHIVE", default_archive(e), archive_target),
            archive_days=e.integer("RESEARCH_ARCHIVE_DAYS", cls.archive_days, minimum=1),
            archive_endpoint=e.parse("RESEARCH_ARCHIVE_ENDPOINT", None, http_url),
            archive_operator=e.parse("RESEARCH_ARCHIVE_OPERATOR", "", header_value),
            render=e.parse("RESEARCH_RENDER", cls.render, render_mode),
            render_budget=e.integer("RESEARCH_RENDER_BUDGET", cls.render_budget, minimum=1),
            chromium=e.text("RESEARCH_CHROMIUM") or cls.chromium,
            render_max_requests=e.integer("RESEARCH_RENDER_MAX_REQUESTS", cls.render_max_requests, minimum=1),
            render_max_bytes=e.integer("RESEARCH_RENDER_MAX_BYTES", cls.render_max_bytes, minimum=1),
            render_memory_mb=e.integer("RESEARCH_RENDER_MEMORY_MB", cls.render_memory_mb, minimum=64),
            render_warm=e.integer("RESEARCH_RENDER_WARM", cls.render_warm, minimum=0, maximum=8),
            render_quiet_s=e.seconds("RESEARCH_RENDER_QUIET_S", cls.render_quiet_s, maximum=1.0),
            mcp_tokens_file=e.text("RESEARCH_MCP_TOKENS_FILE"),
            mcp_origins=e.parse("RESEARCH_MCP_ORIGINS", (), origins),
            mcp_rate_per_minute=e.integer("RESEARCH_MCP_RATE_PER_MIN", cls.mcp_rate_per_minute, minimum=1),
            mcp_max_body_bytes=e.integer("RESEARCH_MCP_MAX_BODY_BYTES", cls.mcp_max_body_bytes, minimum=1024),
            mcp_user_urls=e.parse("RESEARCH_MCP_USER_URLS", cls.mcp_user_urls, user_urls),
            org_daily_searches=e.parse("RESEARCH_ORG_DAILY_SEARCHES", None, daily_cap),
            org_daily_fetches=e.parse("RESEARCH_ORG_DAILY_FETCHES", None, daily_cap),
        )
        settings.check_search()
        if settings.embedded and settings.redis_url is not None:
            raise ConfigError("RESEARCH_EMBEDDED: is on, but REDIS_URL names a Redis; unset one of them")
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
        return redis_target(self.redis_url)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ClientSettings:
        return cls.read(Env(os.environ if env is None else env))

    @classmethod
    def read(cls, e: Env) -> ClientSettings:
        return cls(
            redis_url=e.parse("REDIS_URL", None, redis_url),
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


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def numeric_settings() -> dict[str, NumberBounds]:
    """Every numeric setting a worker or a client reads, with the bounds it is read with."""
    e = Env({})
    Settings.read(e)
    ClientSettings.read(e)
    return e.numbers
