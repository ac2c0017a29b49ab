"""The settings' kinds and bounds: their defaults, the enumerations, the secret, the archive targets.

Imported by everything that reads a setting; it imports nothing but the redaction of URLs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from worker.redact import redact_urls

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
