"""Settings: one frozen object built once from the environment at start-up and passed down.

No module outside this package reads the environment. A bad value raises ``ConfigError`` with one
line that names the variable, so a misconfigured replica stops at start-up instead of failing jobs
later.

The package: ``values`` (kinds, defaults, bounds), ``env`` (the reader), ``validators`` (one raw value
each), ``files`` (what the settings read from disk), ``record`` (``Settings``, ``ClientSettings``).
"""

from worker.config.env import NumberBounds
from worker.config.files import load_org_keys
from worker.config.record import ClientSettings, Settings, default_worker_id, numeric_settings
from worker.config.values import (
    ArchiveBucket,
    ArchiveDirectory,
    ArchiveTarget,
    ConfigError,
    RenderMode,
    SearchProvider,
    Secret,
    UserUrls,
)
from worker.redact import redact_url

__all__ = [
    "ArchiveBucket",
    "ArchiveDirectory",
    "ArchiveTarget",
    "ClientSettings",
    "ConfigError",
    "NumberBounds",
    "RenderMode",
    "SearchProvider",
    "Secret",
    "Settings",
    "UserUrls",
    "default_worker_id",
    "load_org_keys",
    "numeric_settings",
    "redact_url",
]
