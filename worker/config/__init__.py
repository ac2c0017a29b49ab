"""Settings: one frozen object built once from the environment at start-up and passed down.

No module outside this package reads the environment. A bad value raises ``ConfigError`` with one
line that names the variable, so a misconfigured replica stops at start-up instead of failing jobs
later.

The package: ``values`` (kinds, defaults, bounds), ``env`` (the reader), ``validators`` (one raw value
each), ``files`` (what the settings read from disk), ``record`` (``Settings``, ``ClientSettings``).
"""

from worker.config.env import Env, NumberBounds, shown_number
from worker.config.files import default_archive, load_org_keys
from worker.config.record import ClientSettings, Settings, default_worker_id, numeric_settings
from worker.config.values import (
    DEFAULT_BASE_URL,
    DEFAULT_REDIS_URL,
    DEFAULT_SEARCH_MODEL,
    DEFAULT_USER_AGENT,
    SEARCH_ENGINES,
    SEARCH_MODEL_ALLOW_LIST,
    ArchiveBucket,
    ArchiveDirectory,
    ArchiveTarget,
    ConfigError,
    LogFormat,
    RenderMode,
    SearchProvider,
    Secret,
)
from worker.redact import redact_url

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_REDIS_URL",
    "DEFAULT_SEARCH_MODEL",
    "DEFAULT_USER_AGENT",
    "SEARCH_ENGINES",
    "SEARCH_MODEL_ALLOW_LIST",
    "ArchiveBucket",
    "ArchiveDirectory",
    "ArchiveTarget",
    "ClientSettings",
    "ConfigError",
    "Env",
    "LogFormat",
    "NumberBounds",
    "RenderMode",
    "SearchProvider",
    "Secret",
    "Settings",
    "default_archive",
    "default_worker_id",
    "load_org_keys",
    "numeric_settings",
    "redact_url",
    "shown_number",
]
